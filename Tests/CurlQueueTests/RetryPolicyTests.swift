@testable import CurlQueue
import CurlQueueTestHelpers
import Foundation
import HTTPTypes
import Testing

@Suite struct RetryPolicyTests {
    let now = Date(timeIntervalSince1970: 1_700_000_000)

    func response(_ status: Int, retryAfter: String? = nil) -> Response {
        var fields = HTTPFields()
        if let retryAfter { fields[.retryAfter] = retryAfter }
        return Response(status: .init(code: status), headerFields: fields, body: Data(), fileURL: nil,
                        effectiveURL: nil, httpVersion: .http1_1, metrics: TransferMetrics(), attempts: 1)
    }

    func failure(_ code: CurlCode) -> AttemptOutcome {
        .failure(.transport(TransportFailure(code: code, message: "")))
    }

    @Test func backoffGrowsExponentiallyUpToTheCap() {
        let policy = RetryPolicy(initialBackoff: .milliseconds(100), maxBackoff: .seconds(1), multiplier: 2, jitter: 0)
        #expect(policy.backoff(afterAttempt: 1, random: 0.5) == .milliseconds(100))
        #expect(policy.backoff(afterAttempt: 2, random: 0.5) == .milliseconds(200))
        #expect(policy.backoff(afterAttempt: 4, random: 0.5) == .milliseconds(800))
        #expect(policy.backoff(afterAttempt: 5, random: 0.5) == .seconds(1))
        #expect(policy.backoff(afterAttempt: 60, random: 0.5) == .seconds(1))
    }

    @Test func extremePoliciesGiveWaitsInsteadOfTrapping() {
        // Before, each of these trapped converting seconds to Int64 nanoseconds, on the
        // engine thread, which took the whole process down.
        let endless = RetryPolicy(maxBackoff: .seconds(Int64.max), jitter: 1, maxRetryAfter: .seconds(Int64.max))
        let farFuture = endless.spread(retryAfter: .seconds(253_402_300_799), random: 0.99)  // 31 Dec 9999
        #expect(farFuture > .seconds(253_402_300_799))
        let huge = RetryPolicy(initialBackoff: .seconds(1 << 40), maxBackoff: .seconds(Int64.max), jitter: 0)
        #expect(huge.backoff(afterAttempt: 30, random: 0.5) == .nanoseconds(Int64.max))
        let notANumber = RetryPolicy(initialBackoff: .zero, multiplier: .infinity)
        #expect(notANumber.backoff(afterAttempt: 3, random: 0.5) == .zero)
        let negative = RetryPolicy(initialBackoff: .seconds(-5), jitter: 0)
        #expect(negative.backoff(afterAttempt: 1, random: 0.5) == .zero)
    }

    @Test func jitterStaysWithinTheUpperFractionOfTheWait() {
        let policy = RetryPolicy(initialBackoff: .seconds(1), jitter: 0.5)
        #expect(policy.backoff(afterAttempt: 1, random: 0) == .milliseconds(500))
        #expect(policy.backoff(afterAttempt: 1, random: 0.999_999_999) <= .seconds(1))
        #expect(policy.backoff(afterAttempt: 1, random: 0.5) == .milliseconds(750))
    }

    @Test func nothingRetriesWhenAutoRetryIsOff() {
        let decision = RetryDecision(autoRetry: false, errorCodes: CurlCode.connectivityErrors, policy: RetryPolicy())
        #expect(decision.delay(after: failure(.couldNotConnect), attempt: 1, now: now, random: 0) == nil)
    }

    @Test func connectivityErrorsRetryUntilTheLastAttempt() {
        let decision = RetryDecision(autoRetry: true, errorCodes: CurlCode.connectivityErrors, policy: RetryPolicy(maxAttempts: 3))
        #expect(decision.delay(after: failure(.couldNotConnect), attempt: 1, now: now, random: 0) != nil)
        #expect(decision.delay(after: failure(.recvError), attempt: 2, now: now, random: 0) != nil)
        #expect(decision.delay(after: failure(.couldNotConnect), attempt: 3, now: now, random: 0) == nil)
    }

    @Test func otherFailuresNeverRetry() {
        let decision = RetryDecision(autoRetry: true, errorCodes: CurlCode.connectivityErrors, policy: RetryPolicy())
        #expect(decision.delay(after: failure(.peerFailedVerification), attempt: 1, now: now, random: 0) == nil)
        #expect(decision.delay(after: failure(.writeError), attempt: 1, now: now, random: 0) == nil)
        #expect(decision.delay(after: .failure(.invalidRequest("x")), attempt: 1, now: now, random: 0) == nil)
        #expect(decision.delay(after: .failure(.cancelled), attempt: 1, now: now, random: 0) == nil)
        #expect(decision.delay(after: .response(response(404)), attempt: 1, now: now, random: 0) == nil)
        #expect(decision.delay(after: .response(response(503)), attempt: 1, now: now, random: 0) == nil)
    }

    @Test func chosenStatusesRetryAndHonourRetryAfterSeconds() {
        let policy = RetryPolicy(initialBackoff: .milliseconds(100), retryableStatuses: [503])
        let decision = RetryDecision(autoRetry: true, errorCodes: [], policy: policy)
        #expect(decision.delay(after: .response(response(503, retryAfter: "7")), attempt: 1, now: now, random: 0) == .seconds(7))
        let plain = decision.delay(after: .response(response(503)), attempt: 1, now: now, random: 0)
        #expect(plain == .milliseconds(50))
        #expect(decision.delay(after: .response(response(500)), attempt: 1, now: now, random: 0) == nil)
    }

    /// `Retry-After` is the earliest time to come back: up to `jitter` of it again (at most
    /// `maxBackoff`) is added at random, so that clients given the same time do not all return
    /// at that moment (RetryStormTests shows it at the server).
    @Test func aRetryAfterIsSpreadAboveTheAskedTimeByTheJitter() {
        let policy = RetryPolicy(maxBackoff: .seconds(30), jitter: 0.5, retryableStatuses: [429])
        let decision = RetryDecision(autoRetry: true, errorCodes: [], policy: policy)
        let asked = { (value: String, random: Double) in
            decision.delay(after: .response(response(429, retryAfter: value)), attempt: 1, now: now, random: random)
        }
        #expect(asked("7", 0) == .seconds(7))
        #expect(asked("7", 0.5) == .milliseconds(8750))
        #expect(asked("7", 1) == .milliseconds(10500))
        // Half of 120 s is 60 s, more than maxBackoff: at most 30 s are added.
        #expect(asked("120", 1) == .seconds(150))
        // Without jitter, exactly the time asked.
        var exact = policy
        exact.jitter = 0
        let exactDecision = RetryDecision(autoRetry: true, errorCodes: [], policy: exact)
        #expect(exactDecision.delay(after: .response(response(429, retryAfter: "7")), attempt: 1, now: now, random: 0.9) == .seconds(7))
    }

    @Test func retryAfterAsAnHTTPDateCountsFromNow() {
        let decision = RetryDecision(autoRetry: true, errorCodes: [], policy: RetryPolicy(retryableStatuses: [429]))
        // 1_700_000_000 is Tue, 14 Nov 2023 22:13:20 GMT.
        let value = "Tue, 14 Nov 2023 22:13:32 GMT"
        #expect(decision.delay(after: .response(response(429, retryAfter: value)), attempt: 1, now: now, random: 0) == .seconds(12))
    }

    @Test func aRetryAfterBeyondTheLimitReturnsTheResponse() {
        let policy = RetryPolicy(retryableStatuses: [503], maxRetryAfter: .seconds(60))
        let decision = RetryDecision(autoRetry: true, errorCodes: [], policy: policy)
        #expect(decision.delay(after: .response(response(503, retryAfter: "3600")), attempt: 1, now: now, random: 0) == nil)
    }
}

@Suite struct RetryAfterTests {
    let now = Date(timeIntervalSince1970: 1_700_000_000)  // Tue, 14 Nov 2023 22:13:20 GMT

    @Test(arguments: [
        ("120", Duration.seconds(120)),
        (" 0 ", .zero),
        ("Tue, 14 Nov 2023 22:14:20 GMT", .seconds(60)),
        ("Tuesday, 14-Nov-23 22:14:20 GMT", .seconds(60)),
        ("Tue Nov 14 22:14:20 2023", .seconds(60)),
        ("Mon, 13 Nov 2023 00:00:00 GMT", .zero),
    ])
    func parsesEveryForm(value: String, expected: Duration) {
        #expect(RetryAfter.delay(value, now: now) == expected)
    }

    @Test(arguments: ["", "soon", "-5", "1.5", "Tue, 32 Nov 2023 22:14:20 GMT", "Tue, 14 Foo 2023 22:14:20 GMT", "99999999999999999999"])
    func rejectsOrBoundsGarbage(value: String) {
        let delay = RetryAfter.delay(value, now: now)
        #expect(delay == nil || delay! >= .seconds(999_999_999))
    }
}
