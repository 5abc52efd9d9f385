@testable import CurlQueue
import HTTPTypes
import Testing

@Suite struct ResponseHeadParserTests {
    func parse(_ lines: [String]) -> ResponseHeadParser {
        var parser = ResponseHeadParser()
        for line in lines {
            Array(line.utf8).withUnsafeBytes { parser.consume($0) }
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
