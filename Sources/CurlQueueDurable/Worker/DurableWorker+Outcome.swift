import CurlQueue
import HTTPTypes
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension DurableWorker {
    /// What an attempt's result means for the store: a retryable status or a transport
    /// failure is tried again after the job's backoff while attempts remain (through the store,
    /// so the schedule survives a restart); a cancel is `.cancelled`; the rest is final.
    ///
    /// A retryable status with a `Retry-After` (seconds or an HTTP-date) is tried again no
    /// earlier than it asks (or after the backoff, when that is longer). A server asking for
    /// more than ``JobRetryPolicy/maxRetryAfter`` gets no retry: the response is the job's
    /// outcome, as in the in-memory queue.
    static func outcome(
        of result: Result<Response, RequestError>, job: JobRecord, now: Date, random: Double
    ) -> JobOutcome {
        let retry = job.spec.retry
        let retryAt = now.addingTimeInterval(retry.backoff(afterAttempt: job.attempt, random: random))
        let attemptsLeft = job.attempt < retry.maxAttempts
        switch result {
        case .success(let response):
            let status = response.status.code
            if retry.retryableStatuses.contains(status), attemptsLeft {
                guard let value = response.headerFields[.retryAfter], let asked = RetryAfter.delay(value, now: now) else {
                    return .retry(reason: "HTTP \(status)", at: retryAt)
                }
                let seconds = Double(asked.components.seconds) + Double(asked.components.attoseconds) / 1e18
                if seconds <= retry.maxRetryAfter {
                    return .retry(reason: "HTTP \(status), Retry-After \(value)", at: max(retryAt, now.addingTimeInterval(seconds)))
                }
            }
            let destination = job.spec.request.destination
            return .completed(JobResult(
                status: status,
                bytes: destination == nil ? Int64(response.body.count) : fileSize(response.fileURL),
                file: response.fileURL == nil ? nil : destination,
                sha256: response.fileDigests[.sha256],
                body: destination == nil && response.body.count <= 1 << 20 ? response.body : nil))
        case .failure(.cancelled):
            return .cancelled(reason: "cancelled")
        case .failure(let error) where error.transportFailure != nil && attemptsLeft:
            return .retry(reason: error.description, at: retryAt)
        case .failure(let error):
            return .failed(reason: error.description)
        }
    }

    /// A completed download checked against the job's checksum: the digest computed as the
    /// bytes arrived, or from disk when the file was resumed. A mismatch removes the file and
    /// becomes `.retry` after the backoff while attempts remain, else `.failed`.
    static func verified(
        _ outcome: JobOutcome, file: URL, digests: [DigestAlgorithm: String], job: JobRecord, now: Date, random: Double
    ) -> JobOutcome {
        guard case .completed(let result) = outcome, (200..<300).contains(result.status), let checksum = job.spec.request.checksum,
            let algorithm = DigestAlgorithm(rawValue: checksum.algorithm.lowercased())
        else { return outcome }
        let actual: String
        let reason: String
        if let computed = digests[algorithm] {
            actual = computed
        } else {
            do { actual = try FileDigests.hex([algorithm], ofFileAt: file.path)[algorithm] ?? "" } catch {
                actual = ""
            }
        }
        if actual == checksum.hex.lowercased() { return outcome }
        if actual.isEmpty {
            // Not read (gone, or taken by another attempt of the job): nothing of it is removed.
            reason = "\(algorithm.rawValue) not checked: \(file.path) could not be read"
        } else {
            unlink(file.path)
            reason = "\(algorithm.rawValue) mismatch: the file's is \(actual), the job's \(checksum.hex.lowercased())"
        }
        let retry = job.spec.retry
        guard job.attempt < retry.maxAttempts else { return .failed(reason: reason) }
        return .retry(reason: reason, at: now.addingTimeInterval(retry.backoff(afterAttempt: job.attempt, random: random)))
    }

    private static func fileSize(_ url: URL?) -> Int64 {
        guard let url, let size = try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber else { return 0 }
        return size.int64Value
    }

    /// Flushes a finished download and its folder's entry to disk, before `finish` records
    /// it: a completion in the store never names a file a power loss can take back.
    static func flush(_ url: URL) {
        for path in [url.path, url.deletingLastPathComponent().path] { flush(path: path) }
    }

    /// Flushes the folder entry of `path` (a rename or unlink in it) to disk.
    static func flushFolder(of path: String) {
        flush(path: URL(fileURLWithPath: path).deletingLastPathComponent().path)
    }

    private static func flush(path: String) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        _ = fsync(descriptor)
        close(descriptor)
    }
}
