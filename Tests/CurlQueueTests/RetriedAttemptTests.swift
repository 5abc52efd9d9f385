import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// `RequestOperation.lastRetriedAttempt`: why the attempt before a `.retrying` event failed.
@Suite struct RetriedAttemptTests {
    @Test func eachRetryEventFindsTheCauseOfTheAttemptBeforeIt() async throws {
        try await withServer { server in
            // One 503, then the body.
            let operation = RequestOperation(request: Request(url: server.url("/flaky/why?failures=1")))
            operation.autoRetry = true
            operation.retryPolicy = RetryPolicy(maxAttempts: 3, initialBackoff: .milliseconds(20), retryableStatuses: [503])
            #expect(operation.lastRetriedAttempt == nil)
            let queue = RequestQueue()
            let events = queue.events()
            try queue.add(operation)
            var seen: [RetriedAttempt?] = []
            for await event in events {
                if case .retrying(_, let attempt, _) = event {
                    #expect(attempt == 2)
                    seen.append(operation.lastRetriedAttempt)
                }
                if case .finished = event { break }
            }
            #expect(seen == [RetriedAttempt(number: 1, cause: .status(503))])

            let refused = RequestOperation(request: Request(url: URL(string: "http://127.0.0.1:\(try await unusedPort())/x")!))
            refused.autoRetry = true
            refused.retryPolicy = RetryPolicy(maxAttempts: 2, initialBackoff: .milliseconds(20))
            await #expect(throws: RequestError.self) { try await refused.response() }
            let cause = try #require(refused.lastRetriedAttempt)
            #expect(cause.number == 1)
            guard case .error(let error) = cause.cause else { Issue.record("\(cause)"); return }
            // Usually "connection refused"; in the parallel suite another test may have taken the
            // port meanwhile (then a receive error): either is a network failure, which is the point.
            #expect(error.transportFailure != nil, "\(error)")
        }
    }
}
