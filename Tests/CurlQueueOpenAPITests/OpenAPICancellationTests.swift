import CurlQueue
import CurlQueueOpenAPI
import CurlQueueTestSupport
import Foundation
import OpenAPIFixtureClient
import OpenAPIRuntime
import Testing

/// Cancelling the task that calls the generated client cancels the transfer: the server sees its
/// connection closed.
@Suite(.timeLimit(.minutes(1))) struct OpenAPICancellationTests {
    @Test func cancellingWhileWaitingForTheHeadClosesTheConnection() async throws {
        let fixture = try await OpenAPIFixture.start()
        let client = fixture.client
        let call = Task { try await client.getItem(path: .init(itemID: 1), headers: .init(xRequestTag: "hold")) }
        try await fixture.server.waitUntil { $0.held == 1 }
        call.cancel()
        try await fixture.server.waitUntil { $0.heldClosed == 1 }
        let result = await call.result
        let error = try #require(result.failure as? ClientError)
        #expect(error.underlyingError as? RequestError == .cancelled)
        try await fixture.server.shutdown()
    }

    @Test func cancellingWhileReadingTheBodyClosesTheConnection() async throws {
        let fixture = try await OpenAPIFixture.start()
        let client = fixture.client
        let firstChunk = AsyncStream.makeStream(of: Void.self)
        let call = Task {
            let response = try await client.download(query: .init(size: 1 << 30, id: "big"))
            var bytes = 0
            for try await chunk in try response.ok.body.binary {
                if bytes == 0 { firstChunk.continuation.yield() }
                bytes += chunk.count
            }
            return bytes
        }
        for await _ in firstChunk.stream { break }
        call.cancel()
        try await fixture.server.waitUntil { $0.downloads["big"]?.closedEarly == true }
        #expect(fixture.server.snapshot.downloads["big"]?.finished == false)
        let result = await call.result
        #expect(result.failure as? RequestError == .cancelled)
        try await fixture.server.shutdown()
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
