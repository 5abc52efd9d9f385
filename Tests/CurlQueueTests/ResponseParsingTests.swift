@testable import CurlQueue
import CurlQueueTestHelpers
import Foundation
import HTTPTypes
import Testing

@Suite struct ResponseHeadParserTests {
    func parse(_ lines: [String]) -> ResponseHeadParser {
        var parser = ResponseHeadParser()
        for line in lines {
            Array(line.utf8).withUnsafeBytes { _ = parser.consume($0) }
        }
        return parser
    }

    @Test func readsStatusVersionAndFieldsInOrder() {
        let head = parse(["HTTP/1.1 200 OK\r\n", "A: 1\r\n", "B:  two \r\n", "A: 3\r\n", "\r\n"])
        #expect(head.status == 200)
        #expect(head.version == .http1_1)
        #expect(head.isComplete)
        #expect(head.fields.map(\.value) == ["1", "two", "3"])
        #expect(head.fields[values: HTTPField.Name("a")!] == ["1", "3"])
    }

    @Test func theLastHeadWinsAfterContinueAndRedirects() {
        let head = parse(["HTTP/1.1 100 Continue\r\n", "\r\n", "HTTP/1.1 302 Found\r\n", "Location: /x\r\n", "\r\n",
                          "HTTP/2 404 \r\n", "x-final: yes\r\n", "\r\n"])
        #expect(head.status == 404)
        #expect(head.version == .http2)
        #expect(head.fields.count == 1)
    }

    @Test func badLinesAreSkippedNotFatal() {
        let head = parse(["garbage\r\n", "HTTP/1.1 200 OK\r\n", "no colon here\r\n", ": empty name\r\n",
                          "bad name here: v\r\n", "Good: v\r\n", "\r\n", "Trailer-After: x\r\n"])
        #expect(head.status == 200)
        #expect(head.fields.count == 1)
    }

    @Test(arguments: ["HTTP/1.1 20 OK", "HTTP/x 200", "HTTP/1.1 2000", "HTTP/1.1200 OK", "HTTP/", "HTTP/1.1 099 x"])
    func rejectsMalformedStatusLines(line: String) {
        let head = parse([line + "\r\n"])
        #expect(head.status == nil)
    }

    @Test func fieldNamesKeepTheirSpelling() {
        let names = ["Content-Type", "content-type", "CONTENT-TYPE", "Content-type", "ETag", "etag", "Etag",
                     "Strict-Transport-Security", "strict-transport-security", "X-Request-Id", "x", "A^_`|~!#$%&'*+-."]
        let head = parse(["HTTP/1.1 200 OK\r\n"] + names.map { "\($0): v\r\n" } + ["\r\n"])
        #expect(head.fields.map(\.name.rawName) == names)
        #expect(head.fields.map(\.name.canonicalName) == names.map { $0.lowercased() })
    }

    @Test func namesThatAreNotTokensAreSkipped() {
        var parser = ResponseHeadParser()
        let lines: [[UInt8]] = ["HTTP/1.1 200 OK", "Na\u{EF}ve: v", "Del\u{7F}: v", " Folded: v", "\tFolded: v", "Space : v",
                                "X-A-Name-Longer-Than-A-Word: a:b"].map { Array("\($0)\r\n".utf8) }
            + [[0xFF, 0x41, 0x3A, 0x20, 0x76, 0x0D, 0x0A], Array("\r\n".utf8)]
        for line in lines {
            line.withUnsafeBytes { _ = parser.consume($0) }
        }
        #expect(parser.fields.map(\.name.rawName) == ["X-A-Name-Longer-Than-A-Word"])
        #expect(parser.fields.map(\.value) == ["a:b"])
    }

    @Test func commonNamesEqualTheCheckedOnes() {
        // FieldBytes.commonName skips validation for the names it knows, so it must answer exactly
        // what HTTPField.Name(_:) answers, and know the names a typical server sends.
        let known: [HTTPField.Name] = [.server, .date, .contentType, .contentLength, .lastModified, .connection, .eTag,
                                       .acceptRanges, .cacheControl, .contentEncoding, .transferEncoding, .location]
        for name in known {
            for spelling in [name.rawName, name.canonicalName] {
                let found = Array(spelling.utf8).withUnsafeBytes { FieldBytes.commonName($0) }
                #expect(found?.rawName == spelling)
                #expect(found?.canonicalName == name.canonicalName)
            }
        }
        for spelling in ["CONTENT-TYPE", "Content-type", "Etag", "X-Custom", "Content-Typ", ""] {
            #expect(Array(spelling.utf8).withUnsafeBytes { FieldBytes.commonName($0) } == nil)
        }
    }

    /// The Content-Length read as its line arrives is the number the parsed fields give: the
    /// body limit refuses an announced body by it without parsing the head again.
    @Test func theContentLengthReadAsItArrivesIsTheFieldsNumber() {
        let heads: [[String]] = [
            ["Content-Length: 1024"], ["content-length:7"], ["CONTENT-LENGTH: \t 70000000 \t"], ["Content-Length: +5"],
            ["Content-Length: -5"], ["Content-Length: 5", "Content-Length: 5"], ["Content-Length: 12x"],
            ["Content-Length: 99999999999999999999"], ["Content-Length:"], ["Content-Length : 5"], ["Content-Lengthy: 5"],
            ["Content-Type: text/plain"], ["X: 1", "Content-Length: 42", "Cache-Control: no"], [],
            ["CoNtEnT-lEnGtH: 3"], ["Content_Length: 5"], ["Content-LengtH:6"], ["Content Length: 5"], ["Content-Lengt: 5"],
        ]
        for lines in heads {
            let head = parse(["HTTP/1.1 200 OK\r\n"] + lines.map { $0 + "\r\n" } + ["\r\n"])
            #expect(head.contentLength == head.fields[.contentLength].flatMap { Int64($0) }, "\(lines)")
        }
        #expect(parse(["HTTP/1.1 200 OK\r\n", "Content-Length: 1024\r\n", "\r\n"]).contentLength == 1024)
        // A later head (after a 100 Continue or a redirect) has its own.
        let later = parse(["HTTP/1.1 302 Found\r\n", "Content-Length: 9\r\n", "\r\n", "HTTP/1.1 200 OK\r\n", "\r\n"])
        #expect(later.contentLength == nil)
    }

    @Test func valuesAreTheFieldsHTTPTypesBuildsFromTheBytes() {
        // Printable ASCII takes a fast path; any other value, with control bytes, tabs or obs-text
        // anywhere around the eight-byte words the fast path reads, must come out as before.
        var values: [[UInt8]] = [Array("plain".utf8), Array("caf\u{E9} au lait".utf8), [0x6F, 0xE9, 0x74, 0xE9, 0x20, 0x80, 0xFF],
                                 Array("a\0b\rc".utf8), Array("end\u{1}".utf8), Array("\u{1}start".utf8), []]
        for length in 1...20 {
            for position in 0..<length {
                for odd: UInt8 in [0x00, 0x09, 0x0D, 0x1F, 0x20, 0x7F, 0x80, 0xC3, 0xFF] {
                    var value = Array(repeating: UInt8(ascii: "x"), count: length)
                    value[position] = odd
                    values.append(value)
                }
            }
        }
        let name = HTTPField.Name("X-Value")!
        for value in values {
            var parser = ResponseHeadParser()
            Array("HTTP/1.1 200 OK\r\n".utf8).withUnsafeBytes { _ = parser.consume($0) }
            (Array("X-Value: ".utf8) + value + Array("\r\n".utf8)).withUnsafeBytes { _ = parser.consume($0) }
            // The line loses its trailing CR and LF bytes, then the value its spaces and tabs.
            var bytes = value[...]
            while let last = bytes.last, last == 0x0D || last == 0x0A { bytes.removeLast() }
            while let first = bytes.first, first == 0x20 || first == 0x09 { bytes.removeFirst() }
            while let last = bytes.last, last == 0x20 || last == 0x09 { bytes.removeLast() }
            let expected = HTTPField(name: name, value: bytes)
            #expect(parser.fields.count == 1)
            #expect(parser.fields.first == expected, "value \(value)")
            #expect(parser.fields.first?.value == expected.value, "value \(value)")
        }
    }
}

/// A response from the engine keeps its field lines and parses them on the first read.
@Suite struct LazyResponseFieldsTests {
    func makeResponse(_ lines: [String]) -> Response {
        var parser = ResponseHeadParser()
        for line in ["HTTP/1.1 200 OK\r\n"] + lines + ["\r\n"] {
            Array(line.utf8).withUnsafeBytes { _ = parser.consume($0) }
        }
        return Response(status: .ok, fieldLines: parser.fieldLines, body: Data(), fileURL: nil, effectiveTarget: nil,
                        httpVersion: .http1_1, metrics: TransferMetrics(), attempts: 1)
    }

    @Test func fieldsReadLaterAreTheParsersFields() {
        let lines = ["Content-Type: text/plain\r\n", "bad name: skipped\r\n", "X-A:  1 \r\n", "x-a: 2\r\n", "Empty:\r\n"]
        let response = makeResponse(lines)
        #expect(response.headerFields.map(\.name.rawName) == ["Content-Type", "X-A", "x-a", "Empty"])
        #expect(response.headerFields[values: HTTPField.Name("x-a")!] == ["1", "2"])
        #expect(response.headerFields[.contentType] == "text/plain")
        #expect(makeResponse([]).headerFields.isEmpty)
    }

    @Test func aLineFeedInsideALineIsASpaceAsInAFieldParsedAtOnce() {
        var parser = ResponseHeadParser()
        for line in ["HTTP/1.1 200 OK\r\n", "X-A: one\ntwo\r\n", "X\nB: v\r\n", "\r\n"] {
            Array(line.utf8).withUnsafeBytes { _ = parser.consume($0) }
        }
        let eager = Array("X-A: one\ntwo".utf8).withUnsafeBytes { ResponseHeadParser.parseFieldLine($0) }
        #expect(parser.fields.count == 1)
        #expect(parser.fields.first == eager)
        #expect(parser.fields.first?.value == "one two")
    }

    @Test func longAndEmptyValuesComeBackWhole() {
        let long = String(repeating: "v", count: 70_000)
        let response = makeResponse(["X-Long: \(long)\r\n", "X-Empty:\r\n", "X-Short: s\r\n"])
        #expect(response.headerFields.map(\.value) == [long, "", "s"])
    }

    @Test func aSetFieldReplacesTheLazyOnesInThatCopyOnly() {
        let original = makeResponse(["A: 1\r\n"])
        var copy = original
        copy.headerFields[HTTPField.Name("B")!] = "2"
        #expect(copy.headerFields.map(\.value) == ["1", "2"])
        #expect(original.headerFields.map(\.value) == ["1"])
    }

    @Test func threadsReadingFirstAllSeeTheSameFields() async {
        let response = makeResponse((0..<40).map { "Field-\($0): value \($0)\r\n" })
        let expected = (0..<40).map { "value \($0)" }
        await withTaskGroup(of: [String].self) { group in
            for _ in 0..<8 { group.addTask { response.headerFields.map(\.value) } }
            for await values in group { #expect(values == expected) }
        }
    }
}

@Suite struct ContentRangeTests {
    @Test func parsesCompleteAndUnknownLengths() {
        #expect(ContentRange("bytes 10-19/100") == ContentRange(first: 10, last: 19, completeLength: 100))
        #expect(ContentRange("bytes 0-0/*")?.completeLength == nil)
    }

    @Test(arguments: ["bytes 19-10/100", "bytes 10-100/100", "bits 1-2/3", "bytes -1-2/3", "bytes 1-2", "bytes a-b/c", "bytes 1-2/3x"])
    func rejectsInvalidRanges(value: String) {
        #expect(ContentRange(value) == nil)
    }
}

extension ContentRange {
    init(first: Int64, last: Int64, completeLength: Int64?) {
        self.init("bytes \(first)-\(last)/\(completeLength.map(String.init) ?? "*")")!
    }
}
