public import CurlQueue
import Foundation

/// How often and when a durable job is tried again: a `Codable` mirror of
/// ``CurlQueue/RetryPolicy``, in seconds.
///
/// ``maxAttempts`` counts claims: every time a worker takes the job counts, whether the
/// attempt ended in an error, a retryable status or the worker's death. That is what ends a
/// job that kills its worker each time: it fails after `maxAttempts` claims. It bounds the
/// handler too: a recorded outcome whose worker dies while its handler runs is delivered again,
/// and after `maxAttempts` such deaths the job is failed and handled
/// (``JobOutcome/handlerFailedReason``).
public struct JobRetryPolicy: Codable, Sendable, Hashable {
    /// Claims in all, the first included. At least 1.
    public var maxAttempts: Int
    /// The wait before the first retry, in seconds.
    public var initialBackoff: Double
    /// The longest wait computed from the backoff, in seconds.
    public var maxBackoff: Double
    /// How much each wait grows over the previous one.
    public var multiplier: Double
    /// The fraction (0...1) of each wait that is random.
    public var jitter: Double
    /// HTTP statuses treated as failures worth retrying.
    public var retryableStatuses: Set<Int>
    /// The longest `Retry-After` honoured, in seconds.
    public var maxRetryAfter: Double

    /// A policy. The defaults: 5 claims, 1 s growing ×2 up to 5 minutes, half of each wait
    /// random, the core's transient statuses retried, `Retry-After` honoured up to an hour.
    public init(
        maxAttempts: Int = 5,
        initialBackoff: Double = 1,
        maxBackoff: Double = 300,
        multiplier: Double = 2,
        jitter: Double = 0.5,
        retryableStatuses: Set<Int> = RetryPolicy.transientStatuses,
        maxRetryAfter: Double = 3600
    ) {
        self.maxAttempts = maxAttempts
        self.initialBackoff = initialBackoff
        self.maxBackoff = maxBackoff
        self.multiplier = multiplier
        self.jitter = jitter
        self.retryableStatuses = retryableStatuses
        self.maxRetryAfter = maxRetryAfter
    }

    /// The core's policy this one stands for: the worker decides a job's retries with the
    /// in-memory queue's own decision (backoff, jitter, `Retry-After` spread), not a copy of it.
    public var retryPolicy: RetryPolicy {
        RetryPolicy(
            maxAttempts: maxAttempts, initialBackoff: .wait(seconds: initialBackoff), maxBackoff: .wait(seconds: maxBackoff),
            multiplier: multiplier, jitter: jitter, retryableStatuses: retryableStatuses,
            maxRetryAfter: .wait(seconds: maxRetryAfter))
    }

    /// The wait, in seconds, before the claim that follows attempt `attempt` (1-based), with
    /// `random` in 0..<1 choosing the point within the jitter: the core's backoff.
    public func backoff(afterAttempt attempt: Int, random: Double) -> Double {
        retryPolicy.backoff(afterAttempt: attempt, random: random).seconds
    }
}
