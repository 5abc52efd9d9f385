@testable import curlq
import CurlQueueDownloads
import CurlQueue
import Foundation
import Testing

/// How `curlq` names files: safe names from URLs and `out=`, and unique names in a batch.
@Suite struct CurlqFileNameTests {
    func name(_ url: String) -> String { SafeFileName.from(url: URL(string: url)!) }

    /// What every name handed out must be, whatever came in.
    func expectSafe(_ name: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(!name.isEmpty, sourceLocation: sourceLocation)
        #expect(!name.contains("/") && !name.contains("\\"), "\(name.debugDescription)", sourceLocation: sourceLocation)
        #expect(!name.contains(".."), "\(name.debugDescription)", sourceLocation: sourceLocation)
        #expect(!name.hasPrefix(".") && !name.hasPrefix("-"), "\(name.debugDescription)", sourceLocation: sourceLocation)
        #expect(!name.unicodeScalars.contains { $0.properties.generalCategory == .control }, "\(name.debugDescription)", sourceLocation: sourceLocation)
        #expect(name.utf8.count <= SafeFileName.maxBytes, sourceLocation: sourceLocation)
    }

    @Test func theLastPathSegmentPercentDecoded() {
        #expect(name("https://example.org/files/report.pdf") == "report.pdf")
        #expect(name("https://example.org/files/annual%20report%E2%82%AC.pdf?download=1#top") == "annual report€.pdf")
        #expect(name("https://example.org/a%2Fb") == "a_b")
        #expect(name("https://example.org/%ZZbad%4") == "%ZZbad%4")
        #expect(name("https://example.org/bad-utf8-%FF%FE") == "bad-utf8-\u{FFFD}\u{FFFD}")
    }

    @Test func emptyNamesBecomeIndexHTML() {
        #expect(name("https://example.org") == "index.html")
        #expect(name("https://example.org/") == "index.html")
        #expect(name("https://example.org/dir/") == "index.html")
        #expect(name("https://example.org/..") == "index.html")
        #expect(name("https://example.org/%2E%2E") == "index.html")
        #expect(SafeFileName.sanitize("") == "index.html")
        #expect(SafeFileName.sanitize("...") == "index.html")
        #expect(SafeFileName.sanitize(" / ") == "index.html")
    }

    @Test func hostileNamesCannotLeaveTheFolder() {
        #expect(name("https://example.org/download/..%2F..%2Fetc%2Fpasswd") == "etc_passwd")
        #expect(name("https://example.org/..%5C..%5Cwindows%5Cwin.ini") == "windows_win.ini")
        #expect(SafeFileName.sanitize("../x") == "x")
        #expect(SafeFileName.sanitize("/etc/passwd") == "etc_passwd")
        #expect(SafeFileName.sanitize("./../.././x/../y") == "x_y")
        #expect(SafeFileName.sanitize(".bashrc") == "bashrc")
        #expect(SafeFileName.sanitize("-rf") == "_rf")  // not an option to `rm *`
        #expect(SafeFileName.sanitize(". --help") == "_-help")
        #expect(name("https://example.org/--version") == "_-version")
        #expect(SafeFileName.sanitize("..hidden..name..") == "hidden.name.")
        #expect(SafeFileName.sanitize("a\u{0}b\nc\u{1B}[31md\u{7F}") == "a_b_c_[31md_")
        #expect(SafeFileName.sanitize("evil\u{202E}txt.exe") == "eviltxt.exe")
        #expect(SafeFileName.sanitize("  spaced  ") == "spaced")
        // A combining mark after the separator: one character, still two components.
        #expect(SafeFileName.sanitize("../\u{301}x") == "\u{301}x")
        #expect(!SafeFileName.sanitize("a/\u{301}b").unicodeScalars.contains("/"))
        // Where the cut meets the extension or leaves a space: tidied again, so that the rules
        // still hold and making a name safe twice changes nothing.
        #expect(SafeFileName.sanitize(String(repeating: "a", count: 195) + ".X.bin") == String(repeating: "a", count: 195) + ".bin")
        #expect(SafeFileName.sanitize(String(repeating: "a", count: 199) + " b") == String(repeating: "a", count: 199))
        let inputs = ["../x", "..", ".", "/", "\\..\\", "..%2F", "\u{0}", ". .", ".\u{200B}.", "a/../../b", String(repeating: "../", count: 100)]
        for input in inputs {
            expectSafe(SafeFileName.sanitize(input))
            expectSafe(SafeFileName.sanitize(TextEscaping.percentDecoded(input)))
        }
    }

    @Test func aLongExtensionOfFewCharactersIsNotKeptWholeNorLeftAlone() {
        // One "character" of 301 bytes: a letter and 150 combining accents, as an extension
        // and as a stem. Before, the extension was kept whole (16 characters, hundreds of
        // bytes) and the stem dropped: a hidden name over 200 bytes.
        let heavy = "a" + String(repeating: "\u{0301}", count: 150)
        for raw in ["x." + heavy, heavy + ".bin", heavy] {
            let cut = SafeFileName.sanitize(raw)
            expectSafe(cut)
            #expect(["x", "a"].contains(cut.unicodeScalars.first), "\(cut.debugDescription)")
        }
        #expect(SafeFileName.sanitize(heavy + ".bin").hasSuffix(".bin"))
        expectSafe(name("http://h/x.a" + String(repeating: "%CC%81", count: 150)))
    }

    @Test func longNamesAreCutKeepingTheExtension() {
        let long = SafeFileName.sanitize(String(repeating: "é", count: 300) + ".tar.gz")
        #expect(long.utf8.count <= SafeFileName.maxBytes)
        #expect(long.hasSuffix(".gz") && long.hasPrefix("éé"))
        let noExtension = SafeFileName.sanitize(String(repeating: "x", count: 1000))
        #expect(noExtension == String(repeating: "x", count: SafeFileName.maxBytes))
    }

    @Test func clashesInABatchGetNumberSuffixes() {
        var names = NameAllocator()
        #expect(names.claim("a.bin") == "a.bin")
        #expect(names.claim("a.bin") == "a.bin.1")
        #expect(names.claim("a.bin") == "a.bin.2")
        #expect(names.claim("a.bin.1") == "a.bin.1.1")
        #expect(names.claim("b") == "b")
    }

    @Test func namesNeverCollideWithAnotherFilesWorkingFiles() {
        var names = NameAllocator()
        #expect(names.claim("x") == "x")
        #expect(names.claim("x.part") == "x.part.1")  // x.part is x's partial download
        #expect(names.claim("x.unverified") == "x.unverified.1")
        var reversed = NameAllocator()
        #expect(reversed.claim("y.part") == "y.part")
        #expect(reversed.claim("y") == "y.1")  // y's .part would be the other file
    }

    @Test func randomInputsAlwaysGiveSafeNames() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("-./\\%2Fe.\u{0}\u{1F}\u{7F} aZ€😀\u{202E}\u{301}")
        for _ in 0..<2000 {
            let length = Int.random(in: 0...40, using: &generator)
            let raw = String((0..<length).map { _ in alphabet.randomElement(using: &generator)! })
            expectSafe(SafeFileName.sanitize(raw))
            expectSafe(SafeFileName.sanitize(TextEscaping.percentDecoded(raw)))
        }
    }
}
