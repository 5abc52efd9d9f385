import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// Automatic retry against real failures.
@Suite struct RetryTests {
    func fastPolicy(_ attempts: Int = 5, statuses: Set<Int> = []) -> RetryPolicy {
        RetryPolicy(maxAttempts: attempts, initialBackoff: .milliseconds(20), maxBackoff: .milliseconds(200),
                    retryableStatuses: statuses)
    }

    @Test func aRetrySucceedsOnceARefusedPortStartsListening() async throws {
        let port = try await unusedPort()
        let operation = RequestOperation(request: Request(url: URL(string: "http://127.0.0.1:\(port)/bytes/42")!))
        operation.autoRetry = true
        operation.retryPolicy = RetryPolicy(maxAttempts: 100, initialBackoff: .milliseconds(50), maxBackoff: .milliseconds(100))
        let queue = RequestQueue()
        let events = queue.events()
        try queue.add(operation)
        // Wait for the first refused attempt, then start listening on that port.
        for await event in events {
            if case .retrying = event { break }
        }
        let server = try await FixtureServer.start(port: port)
        let response = try await operation.response()
        #expect(response.bodyBytes == FixtureServer.expectedBytes(count: 42))
        #expect(response.attempts >= 2)
        try await server.shutdown()
    }

    @Test func connectionDropsAreRetriedUpToTheLimit() async throws {
        try await withServer { server in
            let operation = RequestOperation(request: Request(url: server.url("/flaky/drops?failures=2&mode=close")))
            operation.autoRetry = true
            operation.retryPolicy = fastPolicy()
            let response = try await operation.response()
            #expect(String(decoding: response.body, as: UTF8.self) == "ok drops")
            #expect(response.attempts == 3)
            #expect(server.hits("drops") == 3)
        }
    }

    @Test func retriesStopAtMaxAttempts() async throws {
        try await withServer { server in
            let operation = RequestOperation(request: Request(url: server.url("/flaky/forever?failures=100&mode=reset")))
            operation.autoRetry = true
            operation.retryPolicy = fastPolicy(3)
            let result = await completion(of: operation)
            #expect(result.failure?.transportFailure != nil)
            #expect(server.hits("forever") == 3)
        }
    }

    @Test func withoutAutoRetryAFailureCompletesAtOnce() async throws {
        try await withServer { server in
            let operation = RequestOperation(request: Request(url: server.url("/flaky/once?failures=1&mode=close")))
            let result = await completion(of: operation)
            #expect(result.failure?.transportFailure?.code == .gotNothing)
            #expect(server.hits("once") == 1)
        }
    }

    @Test func notFoundIsNeverRetried() async throws {
        try await withServer { server in
            let operation = RequestOperation(request: Request(url: server.url("/status/404")))
            operation.autoRetry = true
            operation.retryPolicy = fastPolicy(statuses: RetryPolicy.transientStatuses)
            let response = try await operation.response()
            #expect(response.status == .notFound)
            #expect(server.requests.count == 1)
        }
    }

    @Test func aMalformedURLIsNeverRetried() async throws {
        let operation = RequestOperation(request: Request(string: "http://exa mple.com:99999/"))
        operation.autoRetry = true
        operation.retryPolicy = fastPolicy()
        let result = await completion(of: operation)
        guard case .failure(.invalidRequest) = result else {
            Issue.record("expected invalidRequest, got \(result)")
            return
        }
    }

    @Test func retryAfterInSecondsIsHonoured() async throws {
        try await withServer { server in
            let operation = RequestOperation(request: Request(url: server.url("/flaky/later?failures=1&status=503&retryAfter=1")))
            operation.autoRetry = true
            operation.retryPolicy = fastPolicy(statuses: [503])
            let start = ContinuousClock.now
            let response = try await operation.response()
            #expect(response.status == .ok)
            #expect(ContinuousClock.now - start >= .seconds(1))
            #expect(server.hits("later") == 2)
        }
    }

    @Test func retryAfterAsAnHTTPDateIsHonoured() async throws {
        try await withServer { server in
            let operation = RequestOperation(request: Request(url: server.url("/flaky/dated?failures=1&status=429&retryAfterDate=2")))
            operation.autoRetry = true
            operation.retryPolicy = fastPolicy(statuses: [429])
            let start = ContinuousClock.now
            let response = try await operation.response()
            #expect(response.status == .ok)
            // An HTTP-date has one-second resolution: at least one second passed.
            #expect(ContinuousClock.now - start >= .seconds(1))
        }
    }

    @Test func retryableStatusesGiveTheLastResponseWhenAttemptsRunOut() async throws {
        try await withServer { server in
            let operation = RequestOperation(request: Request(url: server.url("/flaky/busy?failures=10&status=503")))
            operation.autoRetry = true
            operation.retryPolicy = fastPolicy(2, statuses: [503])
            let response = try await operation.response()
            #expect(response.status == .serviceUnavailable)
            #expect(response.attempts == 2)
        }
    }

    @Test func cancelDuringTheRetryWaitCompletesCancelled() async throws {
        try await withServer { server in
            let operation = RequestOperation(request: Request(url: server.url("/flaky/wait?failures=5&status=503&retryAfter=30")))
            operation.autoRetry = true
            operation.retryPolicy = fastPolicy(statuses: [503])
            let queue = RequestQueue()
            let events = queue.events()
            try queue.add(operation)
            for await event in events {
                if case .retrying = event { break }
            }
            operation.cancel()
            await #expect(throws: RequestError.cancelled) { try await operation.response() }
            #expect(server.hits("wait") == 1)
        }
    }
}
