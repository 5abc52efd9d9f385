@testable import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// A streamed request body is sent once: a retry or a 307 redirect after a byte of it was taken
/// fails clearly, and another operation cannot send it. (Before a byte was taken a new attempt
/// goes on: `UploadChannelStateMachineTests.aNewAttemptGoesOnOnlyWhileNoByteWasTaken`.)
@Suite struct StreamedUploadReplayTests {
    func url(_ server: OpenAPIFixtureServer, _ name: String, _ query: [String: String]) -> URL {
        var components = URLComponents(url: server.baseURL.appendingPathComponent("blobs/\(name)"), resolvingAgainstBaseURL: false)!
        components.queryItems = query.sorted { $0.key < $1.key }.map { URLQueryItem(name: $0.key, value: $0.value) }
        return components.url!
    }

    func retrying(_ request: Request) -> RequestOperation {
        let operation = RequestOperation(request: request)
        operation.autoRetry = true
        operation.retryPolicy = RetryPolicy(maxAttempts: 3, initialBackoff: .milliseconds(1), retryableStatuses: [503])
        return operation
    }

    @Test func aRetryAfterBytesWereSentFailsClearly() async throws {
        let server = try await OpenAPIFixtureServer.start()
        let body = RequestBodyStream(PatternUpload(total: 300_000, chunkSize: 50_000))
        let operation = retrying(Request(url: url(server, "retry", ["status": "503"]), method: .put, body: .stream(body)))
        let result = await completion(of: operation)
        guard case .failure(.invalidRequest(let reason)) = result else {
            Issue.record("expected an invalid request, got \(result)")
            return
        }
        #expect(reason.contains("cannot be sent again"))
        #expect(reason.contains("HTTP 503"))
        #expect(server.snapshot.uploads["retry"]?.requests == 1)
        try await server.shutdown()
    }

    @Test func a307AfterBytesWereSentFailsClearly() async throws {
        let server = try await OpenAPIFixtureServer.start()
        let body = RequestBodyStream(PatternUpload(total: 300_000, chunkSize: 50_000))
        let request = Request(url: url(server, "moved", ["status": "307"]), method: .put, body: .stream(body))
        let result = await completion(of: RequestOperation(request: request))
        guard case .failure(.invalidRequest(let reason)) = result else {
            Issue.record("expected an invalid request, got \(result)")
            return
        }
        #expect(reason.contains("cannot be sent again"))
        #expect(server.snapshot.uploads["moved-next"] == nil)
        try await server.shutdown()
    }

    @Test func anotherOperationWithTheSameStreamIsRefused() async throws {
        let server = try await OpenAPIFixtureServer.start()
        let body = RequestBodyStream(PatternUpload(total: 1000, chunkSize: 100))
        let request = Request(url: url(server, "twice", [:]), method: .put, body: .stream(body))
        #expect(try await RequestOperation(request: request).response().status == .ok)
        let second = await completion(of: RequestOperation(request: request))
        guard case .failure(.invalidRequest(let reason)) = second else {
            Issue.record("expected an invalid request, got \(second)")
            return
        }
        #expect(reason.contains("another operation"))
        #expect(server.snapshot.uploads["twice"]?.requests == 1)
        try await server.shutdown()
    }
}
