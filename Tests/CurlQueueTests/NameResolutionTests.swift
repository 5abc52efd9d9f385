import CurlQueue
import CurlQueueTestSupport
import Foundation
import Testing

/// A host name that cannot be resolved: `couldNotResolveHost` (6), which `autoRetry` retries
/// like the other connectivity codes, up to `maxAttempts`.
///
/// The name is under `.invalid` (RFC 6761: never resolves) and its first label is 64
/// characters, one more than DNS allows, so glibc's resolver refuses it without sending a query:
/// the tests send nothing but to 127.0.0.1. libcurl reports every resolver failure with code 6,
/// NXDOMAIN or a resolver that cannot be reached alike; a retry is what the second needs.
@Suite struct NameResolutionTests {
    static let unresolvable = URL(string: "http://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.invalid/file")!

    @Test func anUnresolvableNameFailsWithCouldNotResolveHost() async throws {
        let result = await completion(of: RequestOperation(request: Request(url: Self.unresolvable)))
        #expect(transportCode(of: result) == .couldNotResolveHost, "\(result)")
    }

    /// With `autoRetry` and 3 attempts, the queue reports retries 2 and 3, then the failure.
    @Test func autoRetryRetriesAnUnresolvableNameUpToMaxAttempts() async throws {
        let queue = RequestQueue()
        let events = queue.events()
        let operation = RequestOperation(request: Request(url: Self.unresolvable))
        operation.autoRetry = true
        operation.retryPolicy = RetryPolicy(maxAttempts: 3, initialBackoff: .milliseconds(10), maxBackoff: .milliseconds(20))
        try queue.add(operation)
        var retries: [Int] = []
        var outcome: Result<Response, RequestError>?
        loop: for await event in events {
            switch event {
            case .retrying(let subject, let attempt, _) where subject === operation:
                retries.append(attempt)
            case .finished(let subject, let result) where subject === operation:
                outcome = result
                break loop
            default:
                break
            }
        }
        #expect(retries == [2, 3])
        #expect(outcome.map(transportCode(of:)) == .couldNotResolveHost, "\(String(describing: outcome))")
    }
}
