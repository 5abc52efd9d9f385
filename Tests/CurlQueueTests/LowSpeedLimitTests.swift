import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// `Timeouts.lowSpeed` (curl's `--speed-limit`/`--speed-time`): a body that trickles below the
/// lowest speed fails as a time-out, one above it completes. The idle limit never sees either
/// as a stall: bytes keep moving.
@Suite struct LowSpeedLimitTests {
    /// libcurl measures the speed about once a second, averaged over the last few seconds, and
    /// fails once it stayed below the limit for the whole duration; the slack covers that
    /// averaging and a loaded machine (ThreadSanitizer included).
    static let slack = Duration.seconds(8)

    private func run(_ request: Request) async -> (Result<Response, RequestError>, Duration) {
        let operation = RequestOperation(request: request)
        let start = ContinuousClock.now
        let (result, end) = await withCheckedContinuation { continuation in
            operation.completionHandler = { continuation.resume(returning: ($0, ContinuousClock.now)) }
            try! operation.start()
        }
        return (result, end - start)
    }

    private func request(_ url: URL) -> Request {
        var request = Request(url: url)
        request.timeouts.lowSpeed = .init(bytesPerSecond: 10_000, duration: .seconds(2))
        // A backstop: should the lowest speed not work, the test fails at it instead of hanging.
        request.timeouts.total = .seconds(30)
        return request
    }

    @Test func aBodyBelowTheLowestSpeedFailsAfterItsDuration() async throws {
        try await withServer { server in
            // 100 bytes every 100 ms: 1,000 bytes/s for 100 s, under 10,000 bytes/s.
            let (result, elapsed) = await run(request(server.url("/bytes/100000?chunk=100&drip=100")))
            print("trickle below the lowest speed: failed after \(elapsed)")
            guard case .failure(.timedOut(let failure)) = result else {
                Issue.record("expected timedOut, got \(result)")
                return
            }
            #expect(failure.code == .operationTimedOut)
            #expect(elapsed >= .milliseconds(1900) && elapsed <= .seconds(2) + Self.slack, "failed after \(elapsed)")
        }
    }

    @Test func aBodyAboveTheLowestSpeedCompletes() async throws {
        try await withServer { server in
            // 4,000 bytes every 100 ms: 40,000 bytes/s for 6 s, forty times a lowest speed of
            // 1,000 bytes/s and longer than its 5 s. The margins are for a loaded machine: libcurl
            // counts the wait for the head too, and a parallel suite at a load of 24 on 2 cores
            // held a 4,000 bytes/s limit over 3 s under for the whole 3 s.
            var request = request(server.url("/bytes/240000?chunk=4000&drip=100"))
            request.timeouts.lowSpeed = .init(bytesPerSecond: 1_000, duration: .seconds(5))
            // The backstop only catches a hang: a clean-clone run of the parallel suite under a
            // helper's build once stretched these 6 s of drip to over 30 s (236,000 bytes, about
            // 8,000 bytes/s, still above the lowest speed) and failed at the 30 s backstop.
            request.timeouts.total = .seconds(120)
            let (result, elapsed) = await run(request)
            print("trickle above the lowest speed: done after \(elapsed)")
            let response = try result.get()
            #expect(response.status.code == 200 && response.body.count == 240_000)
        }
    }
}
