@testable import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// `Request.Body.stream`: a body produced while it is sent arrives whole, framed by its length
/// or chunked, and its first bytes reach the server before its last are produced.
@Suite struct StreamedUploadTests {
    func put(_ server: OpenAPIFixtureServer, _ name: String, _ body: RequestBodyStream) -> Request {
        Request(url: server.baseURL.appendingPathComponent("blobs/\(name)"), method: .put, body: .stream(body))
    }

    @Test func aLargeBodyOfKnownLengthArrivesByteIdenticalWithContentLength() async throws {
        let server = try await OpenAPIFixtureServer.start()
        let total = 16 << 20 + 12_345
        let body = RequestBodyStream(length: Int64(total), PatternUpload(total: total, chunkSize: 100_003))
        let response = try await RequestOperation(request: put(server, "known", body)).response()
        #expect(response.status == .ok)
        #expect(try JSONDecoder().decode(UploadReceipt.self, from: response.body).bytes == total)
        let upload = try #require(server.snapshot.uploads["known"])
        #expect(upload.bytes == total)
        #expect(upload.mismatchAt == nil)
        #expect(upload.contentLength == total)
        #expect(!upload.chunked)
        #expect(upload.complete)
        #expect(body.bytesSent == Int64(total))
        try await server.shutdown()
    }

    @Test func aLargeBodyOfUnknownLengthArrivesByteIdenticalChunked() async throws {
        let server = try await OpenAPIFixtureServer.start()
        let total = 16 << 20 + 777
        let body = RequestBodyStream(PatternUpload(total: total, chunkSize: 65_536 + 17))
        let response = try await RequestOperation(request: put(server, "chunked", body)).response()
        #expect(response.status == .ok)
        let upload = try #require(server.snapshot.uploads["chunked"])
        #expect(upload.bytes == total)
        #expect(upload.mismatchAt == nil)
        #expect(upload.contentLength == nil)
        #expect(upload.chunked)
        #expect(upload.complete)
        try await server.shutdown()
    }

    @Test func aPostOfUnknownLengthIsSentChunked() async throws {
        try await withServer { server in
            let text = Data("a posted stream, in three chunks".utf8)
            let chunks = [text.prefix(7), text.dropFirst(7).prefix(11), text.dropFirst(18)].map { Data($0) }
            let body = RequestBodyStream(AsyncStream { continuation in
                for chunk in chunks { continuation.yield(chunk) }
                continuation.finish()
            })
            let response = try await RequestOperation(
                request: Request(url: server.url("/echo"), method: .post, body: .stream(body))).response()
            let echo = try JSONDecoder().decode(UploadSegmentsTests.Echo.self, from: response.body)
            #expect(echo.method == "POST")
            #expect(Data(base64Encoded: echo.body) == text)
            #expect(echo.values("Transfer-Encoding") == ["chunked"])
            #expect(echo.values("Content-Length").isEmpty)
        }
    }

    @Test func theServerHasTheFirstChunkBeforeTheLastIsProduced() async throws {
        let server = try await OpenAPIFixtureServer.start()
        let chunkSize = 64 << 10
        let chunks = 4
        // The last chunk is made only once the server has received the first: a body read to
        // its end before it is sent would wait here until the time-out.
        let body = RequestBodyStream(PatternUpload(total: chunks * chunkSize, chunkSize: chunkSize) { index in
            guard index == chunks - 1 else { return }
            try await server.waitUntil(timeout: .seconds(20)) { ($0.uploads["live"]?.bytes ?? 0) >= chunkSize }
        })
        let response = try await RequestOperation(request: put(server, "live", body)).response()
        #expect(response.status == .ok)
        let upload = try #require(server.snapshot.uploads["live"])
        #expect(upload.bytes == chunks * chunkSize)
        #expect(upload.mismatchAt == nil)
        try await server.shutdown()
    }
}
