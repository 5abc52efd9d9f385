import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Testing

/// `RequestQueue.responses(for:)` iterated on the main actor: each outcome reaches the loop
/// there.
@Suite struct RequestQueueResponsesMainActorTests {
    @MainActor @Test func theLoopRunsOnTheMainActor() async throws {
        let server = try await FixtureServer.start()
        let queue = RequestQueue(maxConcurrentRequestCount: 4)
        var indices: [Int] = []
        for await outcome in queue.responses(for: (0..<30).map { Request(url: server.url("/bytes/\($0)")) }) {
            MainActor.assertIsolated()
            #expect((try? outcome.result.get().body.count) == outcome.index)
            indices.append(outcome.index)
        }
        #expect(indices.sorted() == Array(0..<30))
        try await server.shutdown()
    }
}
