import CurlQueue
import CurlQueueOpenAPI
import CurlQueueTestSupport
import Foundation
import OpenAPIFixtureClient
import OpenAPIRuntime
import Testing

/// Response bodies reach the generated client's caller as they arrive, and a slow reader slows the
/// server: shown from the server's side. A transport that collected bodies would never return
/// the event stream (the server waits for the reader), hence the time limit.
@Suite(.timeLimit(.minutes(1))) struct OpenAPIStreamingTests {
    @Test func eachEventIsReadBeforeTheServerWritesTheNext() async throws {
        let fixture = try await OpenAPIFixture.start()
        fixture.server.openGate("feed-0")
        let response = try await fixture.client.streamEvents(query: .init(count: 3, id: "feed"))
        let body = try response.ok.body.applicationJsonl
        var lines = body.asDecodedJSONLines(of: Components.Schemas.Event.self).makeAsyncIterator()
        for n in 0..<3 {
            let event = try await lines.next()
            #expect(event?.n == n)
            // The server has written line n and no more: the line came before the body's end.
            #expect(fixture.server.snapshot.events["feed"]?.written == n + 1)
            fixture.server.openGate("feed-\(n + 1)")
        }
        #expect(try await lines.next() == nil)
        try await fixture.server.shutdown()
    }

    @Test func aSlowReaderStopsTheServerWriting() async throws {
        let fixture = try await OpenAPIFixture.start()
        let size = 128 << 20
        let response = try await fixture.client.download(query: .init(size: Int64(size), id: "slow"))
        var iterator = try response.ok.body.binary.makeAsyncIterator()
        var received = try await iterator.next()?.count ?? 0
        // Not reading: the server stops once the socket, libcurl's paused transfer and CurlQueue's
        // 1 MiB of chunks not taken are full, far short of the body.
        try await fixture.server.waitUntil { ($0.downloads["slow"]?.pauses ?? 0) > 0 }
        let stalled = try #require(fixture.server.snapshot.downloads["slow"])
        #expect(!stalled.finished)
        #expect(stalled.written < 32 << 20, "the server wrote \(stalled.written) bytes to a reader that took one chunk")
        // And it stays stopped: a transport that took the bytes without a reader would let the
        // server pass 64 MiB in well under the 2 s given here (loopback moves GiB/s).
        await #expect(throws: OpenAPIFixtureServer.TimedOut.self) {
            try await fixture.server.waitUntil(timeout: .seconds(2)) { ($0.downloads["slow"]?.written ?? 0) >= 64 << 20 }
        }
        while let chunk = try await iterator.next() { received += chunk.count }
        #expect(received == size)
        #expect(fixture.server.snapshot.downloads["slow"]?.finished == true)
        try await fixture.server.shutdown()
    }
}
