import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// The fixture's gates hold what they say whichever comes first: the gate's opening or the
/// request. Tests open a gate after a wait of their own, which on a loaded machine may end
/// before the request reaches the server.
@Suite struct FixtureGateTests {
    /// A byte stream whose gate opened before the stream reached its hold point is not held.
    /// Before, the stream stopped there for good (the gate's opening, reported at once, asked a
    /// pump already running to go on, which did nothing): `StallLimitTests.noLimitMeansNone`
    /// hung the parallel suite whenever its request came later than its 1.5 s pause.
    @Test func aStreamWhoseGateIsAlreadyOpenIsNotHeld() async throws {
        try await withServer { server in
            server.openGate("early")
            var request = Request(url: server.url("/bytes/20000?holdAt=10000&gate=early"))
            request.timeouts = Request.Timeouts(total: .seconds(20))  // a backstop: the bug held it for good
            let response = try await completion(of: RequestOperation(request: request)).get()
            #expect(response.body == Data(FixtureServer.expectedBytes(count: 20000)))
        }
    }
}
