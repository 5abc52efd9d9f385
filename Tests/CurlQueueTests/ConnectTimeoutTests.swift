import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// `Request.Timeouts.connect` bounds the connection: a server whose accept queue is full never
/// completes the handshake, and only the connect limit ends the attempt.
@Suite struct ConnectTimeoutTests {
    @Test func aConnectionThatNeverCompletesTimesOutAtTheConnectLimit() async throws {
        let (port, descriptors) = try await fullBacklogListener()
        defer { descriptors.forEach { close($0) } }
        var request = Request(url: URL(string: "http://127.0.0.1:\(port)/hangs")!)
        request.timeouts = Request.Timeouts(connect: .milliseconds(500), total: nil, idle: nil)
        let clock = ContinuousClock()
        let started = clock.now
        let result = await completion(of: RequestOperation(request: request))
        let elapsed = clock.now - started
        guard case .failure(.timedOut(let failure)) = result else {
            Issue.record("expected timedOut, got \(result)")
            return
        }
        #expect(failure.code == .operationTimedOut)
        // Not before the limit, and before the 30 s default would have ended it (the bound is
        // loose: in the parallel suite, with the soak running, this took up to 11 s).
        #expect(elapsed >= .milliseconds(450), "\(elapsed)")
        #expect(elapsed < .seconds(25), "\(elapsed)")
    }
}
