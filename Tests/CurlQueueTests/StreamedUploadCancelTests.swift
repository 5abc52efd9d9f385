@testable import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// Cancelling an operation mid-upload ends the transfer (the server sees the connection end)
/// and the iteration of its streamed body.
@Suite struct StreamedUploadCancelTests {
    /// A body whose fifth chunk waits until its task is cancelled, after four sent.
    func stalledBody(_ record: UploadRecord) -> RequestBodyStream {
        RequestBodyStream(PatternUpload(total: 1 << 30, chunkSize: 64 << 10, record: record) { index in
            if index == 4 { try await waitForCancellation() }
        })
    }

    func request(_ server: OpenAPIFixtureServer, _ name: String, _ body: RequestBodyStream) -> Request {
        Request(url: server.baseURL.appendingPathComponent("blobs/\(name)"), method: .put, body: .stream(body))
    }

    @Test func cancellingTheOperationEndsTheTransferAndTheIteration() async throws {
        let server = try await OpenAPIFixtureServer.start()
        let record = UploadRecord()
        let operation = RequestOperation(request: request(server, "cancel", stalledBody(record)))
        let outcome = Task { await completion(of: operation) }
        try await server.waitUntil { ($0.uploads["cancel"]?.bytes ?? 0) >= 4 * 64 << 10 }
        operation.cancel()
        #expect(await outcome.value.failureValue == .cancelled)
        #expect(await record.waitForEnd() is CancellationError)
        try await server.waitUntil { $0.uploads["cancel"]?.closedEarly == true }
        #expect(server.snapshot.uploads["cancel"]?.complete == false)
        try await server.shutdown()
    }

    @Test func cancellingTheAwaitingTaskEndsTheTransferAndTheIteration() async throws {
        let server = try await OpenAPIFixtureServer.start()
        let record = UploadRecord()
        let operation = RequestOperation(request: request(server, "task", stalledBody(record)))
        let caller = Task { try await operation.response() }
        try await server.waitUntil { ($0.uploads["task"]?.bytes ?? 0) >= 4 * 64 << 10 }
        caller.cancel()
        await #expect(throws: RequestError.cancelled) { try await caller.value }
        #expect(await record.waitForEnd() is CancellationError)
        try await server.waitUntil { $0.uploads["task"]?.closedEarly == true }
        try await server.shutdown()
    }

    @Test func cancellingWhileTheProducerWaitsForRoomStopsIt() async throws {
        let server = try await OpenAPIFixtureServer.start()
        let record = UploadRecord()
        let body = RequestBodyStream(PatternUpload(total: 1 << 30, chunkSize: 64 << 10, record: record))
        var components = URLComponents(url: server.baseURL.appendingPathComponent("blobs/held"), resolvingAgainstBaseURL: false)!
        components.queryItems = [URLQueryItem(name: "holdAfter", value: "65536")]
        let operation = RequestOperation(request: Request(url: components.url!, method: .put, body: .stream(body)))
        let outcome = Task { await completion(of: operation) }
        try await server.waitUntil { $0.uploads["held"]?.held == true }
        #expect(await body.channel.waitUntilProducerWaits())
        let produced = record.produced
        operation.cancel()
        #expect(await outcome.value.failureValue == .cancelled)
        server.openGate("held-hold")  // reading again, the server sees the connection's end
        try await server.waitUntil { $0.uploads["held"]?.closedEarly == true }
        // The waiting write returned false: no further chunk was asked for.
        #expect(record.produced == produced)
        try await server.shutdown()
    }
}

extension Result {
    var failureValue: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
