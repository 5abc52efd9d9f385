package import Foundation

/// What one attempt ended with, in the terms the retry decision needs.
package enum AttemptOutcome: Sendable {
    case response(Response)
    case failure(RequestError)
}

/// The retry decision: pure, with the clock and the random source passed in, so that it is
/// tested deterministically. The durable worker takes the same decision for its jobs.
package struct RetryDecision {
    package var autoRetry: Bool
    package var errorCodes: Set<CurlCode>
    package var policy: RetryPolicy

    package init(autoRetry: Bool, errorCodes: Set<CurlCode>, policy: RetryPolicy) {
        self.autoRetry = autoRetry
        self.errorCodes = errorCodes
        self.policy = policy
    }

    /// The wait before the next attempt, or nil when `outcome` is final.
    /// - Parameters:
    ///   - attempt: The attempt that just ended, 1-based.
    ///   - now: The wall-clock time, for `Retry-After` given as an HTTP-date.
    ///   - random: A number in 0..<1 for the jitter.
    package func delay(after outcome: AttemptOutcome, attempt: Int, now: Date, random: Double) -> Duration? {
        guard autoRetry, attempt < policy.maxAttempts else { return nil }
        switch outcome {
        case .failure(let error):
            guard let failure = error.transportFailure, errorCodes.contains(failure.code) else { return nil }
            return policy.backoff(afterAttempt: attempt, random: random)
        case .response(let response):
            guard policy.retryableStatuses.contains(response.status.code) else { return nil }
            let backoff = policy.backoff(afterAttempt: attempt, random: random)
            guard let value = response.headerFields[.retryAfter] else { return backoff }
            guard let asked = RetryAfter.delay(value, now: now) else { return backoff }
            if asked > policy.maxRetryAfter { return nil }
            return max(policy.spread(retryAfter: asked, random: random), backoff)
        }
    }
}
