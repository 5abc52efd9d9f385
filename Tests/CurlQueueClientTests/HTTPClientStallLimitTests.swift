import CurlQueue
import CurlQueueClient
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// ``HTTPClient``'s default time limits end a stalled or trickling server (StallLimitTests
/// has the limits themselves, on plain operations).
@Suite struct HTTPClientStallLimitTests {
    @Test func theDefaultsEndAStalledOrTricklingServer() async throws {
        // The defaults a daemon gets without setting anything: 60 s idle, 60 s for the head.
        #expect(HTTPClient.Defaults().timeouts == Request.Timeouts())
        try await withServer { server in
            let client = makeClient(server)  // no timeouts of its own: HTTPClient.defaults'
            // More slack: three transfers for a minute beside the rest of the parallel suite, and
            // the calls are timed after their `await`.
            let bound = Duration.seconds(60)...(Duration.seconds(66))
            async let clientStall = clientCall(client, "bytes/100000", ["stallAfter": "10"])
            // One line of the head every 6 s (66 s for the head): never idle for 60 s.
            async let clientTrickle = clientCall(client, "trickle-head", ["interval": "6000", "lines": "1"])
            // One byte of the head every 5 s: ends too (no line is whole for 60 s).
            async let byteTrickle = clientCall(client, "trickle-head", ["interval": "5000"])
            let clientOutcomes = [
                ("default idle, client", await clientStall, "no byte moved"),
                ("default head, client", await clientTrickle, "response head was not complete"),
                ("a byte per 5 s, client", await byteTrickle, ""),
            ]
            for (label, (result, elapsed), words) in clientOutcomes {
                print("\(label): failed after \(elapsed)")
                guard case .failure(.transport(.timedOut(let failure))) = result else {
                    Issue.record("\(label): expected a time-out, got \(result)")
                    continue
                }
                #expect(words.isEmpty || failure.message.contains(words), "\(failure.message)")
                #expect(bound.contains(elapsed), "\(label): \(elapsed)")
            }
        }
    }

    private func clientCall(_ client: HTTPClient, _ path: String, _ query: [String: String]) async -> (Result<Response, HTTPClientError>, Duration) {
        let start = ContinuousClock.now
        let outcome = await result { () async throws(HTTPClientError) in
            try await client.get(path, query: query.map { URLQueryItem(name: $0.key, value: $0.value) })
        }
        return (outcome, ContinuousClock.now - start)
    }
}
