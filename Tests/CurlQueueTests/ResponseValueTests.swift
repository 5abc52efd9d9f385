@testable import CurlQueue
import CurlQueueTestHelpers
import Foundation
import HTTPTypes
import Testing

/// `Response` keeps its values behind one shared reference (copy on write): a copy must still
/// behave as a value — changing it, by any property, leaves every other copy as it was, on any
/// thread — and the fields the engine keeps unparsed must read the same from every copy.
@Suite struct ResponseValueTests {
    static func make() -> Response {
        var parser = ResponseHeadParser()
        for line in ["HTTP/1.1 200 OK\r\n", "Content-Type: text/plain\r\n", "ETag: \"a\"\r\n", "\r\n"] {
            Array(line.utf8).withUnsafeBytes { _ = parser.consume($0) }
        }
        return Response(status: .ok, fieldLines: parser.fieldLines, body: Data("body".utf8), fileURL: nil,
                        effectiveTarget: LazyURL(string: "http://127.0.0.1:1/a"), httpVersion: .http1_1,
                        metrics: TransferMetrics(), attempts: 1)
    }

    static func expectUnchanged(_ response: Response) {
        #expect(response.status == .ok)
        #expect(response.headerFields == [.contentType: "text/plain", .eTag: "\"a\""])
        #expect(response.body == Data("body".utf8))
        #expect(response.fileURL == nil)
        #expect(response.effectiveURL == URL(string: "http://127.0.0.1:1/a"))
        #expect(response.httpVersion == .http1_1)
        #expect(response.metrics.bytesReceived == 0)
        #expect(response.attempts == 1)
    }

    @Test func changingACopyLeavesTheOriginalAlone() {
        let original = Self.make()
        var copy = original
        copy.status = .notFound
        copy.headerFields[.contentType] = "application/json"
        copy.body.append(contentsOf: Array("!".utf8))
        copy.fileURL = URL(fileURLWithPath: "/tmp/x")
        copy.effectiveURL = URL(string: "http://127.0.0.1:1/b")
        copy.httpVersion = .http2
        copy.metrics.bytesReceived = 10
        copy.attempts = 3

        Self.expectUnchanged(original)
        #expect(copy.status == .notFound)
        #expect(copy.headerFields == [.contentType: "application/json", .eTag: "\"a\""])
        #expect(copy.body == Data("body!".utf8))
        #expect(copy.fileURL == URL(fileURLWithPath: "/tmp/x"))
        #expect(copy.effectiveURL == URL(string: "http://127.0.0.1:1/b"))
        #expect(copy.httpVersion == .http2)
        #expect(copy.metrics.bytesReceived == 10)
        #expect(copy.attempts == 3)
    }

    @Test func changingTheOriginalLeavesACopyAlone() {
        var original = Self.make()
        let copy = original
        original.body = Data()
        original.headerFields = [:]
        original.attempts = 2
        Self.expectUnchanged(copy)
        #expect(original.body.isEmpty && original.headerFields.isEmpty && original.attempts == 2)
    }

    /// Copies made from one response and changed on 8 threads at once: each thread sees only
    /// its own changes, and all read the fields parsed from the shared field lines.
    @Test func copiesChangedOnManyThreadsStayApart() async {
        let shared = Self.make()
        let results = await withTaskGroup(of: Bool.self) { group in
            for index in 0..<8 {
                group.addTask {
                    var mine = shared
                    for round in 0..<200 {
                        mine.attempts = index * 1_000 + round
                        mine.body.append(UInt8(index))
                    }
                    return mine.attempts == index * 1_000 + 199 && mine.body.count == 4 + 200
                        && mine.body.dropFirst(4).allSatisfy { $0 == UInt8(index) }
                        && mine.headerFields[.eTag] == "\"a\""
                }
            }
            var all: [Bool] = []
            for await result in group { all.append(result) }
            return all
        }
        #expect(results == Array(repeating: true, count: 8))
        Self.expectUnchanged(shared)
    }
}
