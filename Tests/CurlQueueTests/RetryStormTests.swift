import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// A storm of `429 Too Many Requests` with `Retry-After` across many operations, as the server
/// sees it: no retry comes back early, and the retries come back spread out, not as one burst.
@Suite struct RetryStormTests {
    /// 50 operations at once, each answered `429` with `Retry-After: 1` once and then `200`.
    /// At the server: every retry arrives at least 1 s after its first request; the 50 retries
    /// span at least 250 ms; and no 100 ms holds more than 30 of them (with no spreading they all
    /// came back within 23 ms, 1 s after the storm; spread uniformly over the 500 ms that the
    /// default jitter gives, more than 30 in 100 ms or a span under 250 ms did not happen once in
    /// 300,000 simulated runs).
    @Test func retriesAfterARetryAfterStormWaitTheirTimeAndComeBackSpreadOut() async throws {
        try await withServer { server in
            let count = 50
            let queue = RequestQueue(maxConcurrentRequestCount: 0)
            let failures = LockedBox([String]())
            for index in 0..<count {
                let operation = RequestOperation(request: Request(url: server.url("/flaky/storm\(index)?failures=1&status=429&retryAfter=1")))
                operation.autoRetry = true
                operation.retryPolicy = RetryPolicy(retryableStatuses: [429])
                operation.completionHandler = { result in
                    guard case .success(let response) = result, response.status.code == 200, response.attempts == 2,
                          response.body == Data("ok storm\(index)".utf8)
                    else {
                        failures.update { $0.append("\(index): \(result)") }
                        return
                    }
                }
                try queue.add(operation)
            }
            await queue.waitUntilAllOperationsAreFinished()
            await drain()
            #expect(failures.value.isEmpty, "\(failures.value)")

            let byPath = Dictionary(grouping: server.requests, by: \.path)
            var retries: [ContinuousClock.Instant] = []
            for index in 0..<count {
                let arrivals = (byPath["/flaky/storm\(index)"] ?? []).map(\.arrival).sorted()
                guard arrivals.count == 2 else {
                    Issue.record("storm\(index): \(arrivals.count) requests")
                    continue
                }
                #expect(arrivals[1] - arrivals[0] >= .seconds(1), "storm\(index) came back after \(arrivals[1] - arrivals[0])")
                retries.append(arrivals[1])
            }
            retries.sort()
            guard let first = retries.first, let last = retries.last else { return }
            #expect(last - first >= .milliseconds(250), "the retries came back within \(last - first)")
            let densest = retries.indices.map { start in
                retries[start...].prefix { $0 - retries[start] < .milliseconds(100) }.count
            }.max() ?? 0
            #expect(densest <= 30, "\(densest) of \(count) retries came back within 100 ms")
            print("retry storm: retries span \(last - first); at most \(densest) in any 100 ms")
        }
    }
}
