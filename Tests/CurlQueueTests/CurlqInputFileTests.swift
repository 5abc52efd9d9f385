@testable import curlq
import CurlQueueDownloads
import Foundation
import Testing

/// The input-file parser of `curlq get -i`, and the header syntax it shares with `-H`.
@Suite struct CurlqInputFileTests {
    func parse(_ text: String) throws(InputFileError) -> [InputEntry] {
        try InputFile.parse(Data(text.utf8), origin: "urls.txt")
    }

    func error(_ text: String) -> InputFileError? {
        do {
            _ = try parse(text)
            return nil
        } catch {
            return error
        }
    }

    @Test func urlsWithCommentsBlankLinesAndOptions() throws {
        let entries = try parse("""
            # a comment
            https://example.org/a.iso

              # an indented comment
            http://example.org/b.bin
                out=b-renamed.bin
            \tpriority=HIGH
                sha256=9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08
                header=Authorization: Bearer  abc 
                header=X-Empty:
            https://example.org/c
            """)
        #expect(entries.count == 3)
        #expect(entries[0] == InputEntry(url: URL(string: "https://example.org/a.iso")!, origin: "urls.txt:2"))
        let b = entries[1]
        #expect(b.url.absoluteString == "http://example.org/b.bin")
        #expect(b.origin == "urls.txt:5")
        #expect(b.out == "b-renamed.bin")
        #expect(b.priority == .high)
        #expect(b.checksum == Checksum(algorithm: .sha256, hex: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"))
        #expect(b.headers == [HeaderField(name: "Authorization", value: "Bearer  abc"), HeaderField(name: "X-Empty", value: "")])
        #expect(entries[2].priority == .normal && entries[2].out == nil && entries[2].headers.isEmpty)
    }

    @Test func windowsLineEndingsAByteOrderMarkAndNoFinalNewline() throws {
        var data = Data([0xEF, 0xBB, 0xBF])
        data.append(Data("https://example.org/a\r\n  out=x.bin\r\n\r\nhttps://example.org/b".utf8))
        let entries = try InputFile.parse(data, origin: "in")
        #expect(entries.map(\.url.absoluteString) == ["https://example.org/a", "https://example.org/b"])
        #expect(entries[0].out == "x.bin")
        #expect(entries[1].origin == "in:4")
    }

    @Test func emptyAndCommentOnlyInputsHaveNoEntries() throws {
        #expect(try parse("").isEmpty)
        #expect(try parse("\n\n# nothing\n   \n").isEmpty)
    }

    @Test func malformedLinesAreReportedWithTheirLineNumber() {
        #expect(error("https://ok.example/a\n  out=a\n  bogus=1")?.line == 3)
        #expect(error("https://ok.example/a\n  bogus=1")?.message.contains("unknown key 'bogus'") == true)
        #expect(error("  out=a\nhttps://ok.example/a")?.line == 1)
        #expect(error("https://ok.example/a\n  no equals sign")?.line == 2)
        #expect(error("https://ok.example/a\nnot a url")?.line == 2)
        #expect(error("https://ok.example/a\nftp://example.org/file")?.message.contains("only http and https") == true)
        #expect(error("mailto:someone@example.org")?.line == 1)
        #expect(error("http:///no-host")?.message.contains("no host") == true)
        #expect(error("https://ok.example/a\n\n\n  priority=urgent")?.line == 4)
        #expect(error("https://ok.example/a\n  sha256=abc")?.line == 2)
        #expect(error("https://ok.example/a\n  sha256=\(String(repeating: "g", count: 64))") != nil)
        #expect(error("https://ok.example/a\n  out=")?.line == 2)
        #expect(error("https://ok.example/a\n  out=a\n  out=b")?.message.contains("twice") == true)
        #expect(error("https://ok.example/a\n  header=No colon")?.line == 2)
        #expect(error("https://ok.example/a\n  header=Bad Name: x")?.message.contains("invalid header name") == true)
        #expect(error("https://ok.example/a\n  header=X-A: one\u{7}two")?.line == 2)
        #expect(error("https://ok.example/a b")?.line == 1)
    }

    /// aria2's `checksum=ALGORITHM=HEX` is read as curlq's own `sha256=` and kin.
    @Test func ariasChecksumSpellingIsAccepted() throws {
        let digest = String(repeating: "ab", count: 32)
        let entries = try InputFile.parse(Data("https://ok.example/a\n  checksum=sha-256=\(digest.uppercased())\nhttps://ok.example/b\n  checksum=md5=\(String(repeating: "c", count: 32))\n".utf8), origin: "t")
        #expect(entries.map { $0.checksum?.algorithm } == [.sha256, .md5])
        #expect(entries.first?.checksum?.hex == digest)
        #expect(error("https://ok.example/a\n  checksum=sha-3=ab")?.message.contains("checksum= takes ALGORITHM=HEX") == true)
        #expect(error("https://ok.example/a\n  checksum=\(digest)")?.line == 2)
        #expect(error("https://ok.example/a\n  sha256=\(digest)\n  checksum=sha-256=\(digest)")?.message.contains("both given") == true)
    }

    @Test func aMalformedLineAfterManyGoodOnesStillFailsTheWholeFile() {
        let good = (1...500).map { "https://example.org/file\($0)" }.joined(separator: "\n")
        #expect(error(good + "\n  out=x\n  colour=blue\n")?.line == 502)
    }

    @Test func headerSyntax() throws {
        #expect(try HeaderField.parse("X-Token:  abc def\t").get() == HeaderField(name: "X-Token", value: "abc def"))
        #expect(try HeaderField.parse("Accept:").get() == HeaderField(name: "Accept", value: ""))
        #expect(try HeaderField.parse("X-Url: http://a/b?c=d").get().value == "http://a/b?c=d")
        for bad in ["NoColon", ": value", "Bad Name: x", "X-A: a\rb", "X-A: a\nb", "X-A: a\u{0}b", "Ümlaut: x"] {
            #expect(throws: InputProblem.self, "\(bad.debugDescription) should be refused") { try HeaderField.parse(bad).get() }
        }
    }

    @Test func anEntrysHeadersAddToAndOverrideTheGlobalOnes() {
        let global = [HeaderField(name: "X-A", value: "1"), HeaderField(name: "X-B", value: "2"), HeaderField(name: "x-b", value: "2b")]
        let own = [HeaderField(name: "X-b", value: "3"), HeaderField(name: "X-C", value: "4")]
        #expect(HeaderField.merge(global: global, own: own) == [
            HeaderField(name: "X-A", value: "1"), HeaderField(name: "X-b", value: "3"), HeaderField(name: "X-C", value: "4"),
        ])
        #expect(HeaderField.merge(global: global, own: []) == global)
    }

    @Test func urlValidation() {
        for good in ["http://example.org", "HTTPS://example.org/a?b=c#d", "http://127.0.0.1:8080/x%20y", "http://[::1]/"] {
            #expect((try? InputFile.validateURL(good).get()) != nil, "\(good)")
        }
        for bad in ["", "example.org/file", "file:///etc/passwd", "http://exa mple.org/", "http://example.org/\u{1}", "https://",
                    "http://127.0.0.1:99999/x", "http://127.0.0.1:0/x"] {
            #expect((try? InputFile.validateURL(bad).get()) == nil, "\(bad.debugDescription)")
        }
        #expect((try? InputFile.validateURL("http://127.0.0.1:65535/x").get()) != nil)
    }

    @Test func aURLTooLongIsRefusedUpFrontWithAShortMessage() {
        let long = "http://127.0.0.1/" + String(repeating: "a", count: 5_000_000)
        guard case .failure(let problem) = InputFile.validateURL(long) else {
            Issue.record("a URL of 5 MB was taken")
            return
        }
        #expect(problem.message.contains("longer than 64 KiB"))
        #expect(problem.message.utf8.count < 300)
        #expect((try? InputFile.validateURL("http://127.0.0.1/" + String(repeating: "a", count: 60_000)).get()) != nil)
    }
}
