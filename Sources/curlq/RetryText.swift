import CurlQueue
import CurlQueueDownloads
import Foundation

/// What a retry line says: when the next try comes and why the last one failed,
/// `retrying in 2.1s (attempt 2 of 4): could not connect (…)`.
enum RetryText {
    static func line(_ index: Int, attempt: Int, delay: Double, _ model: BatchModel) -> String {
        let reason = model.live[index].retryReason.map { ": " + Format.safe($0) } ?? ""
        return "retrying in \(Format.duration(delay)) (attempt \(attempt) of \(model.live[index].attemptLimit ?? model.maxAttempts))\(reason)"
    }
}

extension BatchRunner {
    /// Why `operation`'s attempt before `attempt` failed, in words; nil when the operation
    /// has moved on to a later retry already (the event came late).
    static func retryReason(_ operation: RequestOperation, attempt: Int) -> String? {
        guard let retried = operation.lastRetriedAttempt, retried.number == attempt - 1 else { return nil }
        return ErrorWords.describe(retried.cause, host: operation.request.url.host)
    }
}
