import Foundation

/// An attempt of a ``RequestOperation`` that failed and is retried, and why: what a retry
/// message says ("HTTP 503", "connection refused").
public struct RetriedAttempt: Sendable, Hashable {
    /// Why an attempt is retried.
    public enum Cause: Sendable, Hashable {
        /// The server answered with this status, one of ``RetryPolicy/retryableStatuses``.
        case status(Int)
        /// The attempt failed without a retryable answer: a network error, a stall, a timeout.
        case error(RequestError)
    }

    /// The attempt's number: 1 for the first.
    public var number: Int
    /// Why it failed.
    public var cause: Cause

    /// Creates a record of a retried attempt (the operation makes these).
    public init(number: Int, cause: Cause) {
        self.number = number
        self.cause = cause
    }
}

extension RequestOperation {
    /// The most recent attempt that failed and was retried, with its cause; nil before the
    /// first retry. Set before ``RequestQueue/Event/retrying(_:attempt:delay:)`` is published
    /// for its retry, so a reader of that event for attempt `n` finds attempt `n - 1` here
    /// (or, if it reads late, a later one: compare ``RetriedAttempt/number``). Safe from any thread.
    public var lastRetriedAttempt: RetriedAttempt? {
        state.withLock { $0.lastRetried?.value }
    }

    /// Notes why attempt `number` is retried; called under the state's lock.
    static func noteRetry(_ number: Int, after outcome: AttemptOutcome, in state: inout State) {
        let cause: RetriedAttempt.Cause = switch outcome {
        case .response(let response): .status(response.status.code)
        case .failure(let error): .error(error)
        }
        state.lastRetried = SharedValue(RetriedAttempt(number: number, cause: cause))
    }
}
