import CurlQueue
import CurlQueueDownloads
import HTTPTypes
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension DurableWorker {
    /// What an attempt's result means for the store, decided as `curlq get` decides it: the
    /// core's retry decision (``CurlQueue/RetryPolicy`` from the job's ``JobRetryPolicy``:
    /// connectivity failures and the retryable statuses, `Retry-After` honoured with the
    /// core's spread) says whether and when to try again, through the store so that the
    /// schedule survives a restart. What is not retried is final: a 2xx is `.completed`; any
    /// other status, and a transport failure (a refused certificate at once), is `.failed` with
    /// ``ErrorWords``' reason and its ``DownloadFailureKind``; a cancel is `.cancelled`.
    static func outcome(
        of result: Result<Response, RequestError>, job: JobRecord, now: Date, random: Double
    ) -> JobOutcome {
        let retry = job.spec.retry
        let decision = RetryDecision(autoRetry: true, errorCodes: CurlCode.connectivityErrors, policy: retry.retryPolicy)
        let host = URL(string: job.spec.request.url(forAttempt: job.attempt))?.host
        let from = mirrorNote(job)
        // With mirrors, the next attempt goes to another server at once (as `get`: no wait, a
        // `Retry-After` not waited for); the backoff applies when the list is gone round.
        let count = job.spec.request.urls.count
        let wait = { (delay: Duration) in count > 1 && max(job.attempt, 1) % count != 0 ? 0 : delay.seconds }
        switch result {
        case .success(let response):
            let status = response.status.code
            if let delay = decision.delay(after: .response(response), attempt: job.attempt, now: now, random: random) {
                let asked = response.headerFields[.retryAfter].map { ", Retry-After \($0)" } ?? ""
                return .retry(reason: ErrorWords.status(status) + asked + from, at: now.addingTimeInterval(wait(delay)), kind: .http)
            }
            if count > 1, status == 404 || status == 410, job.attempt < retry.maxAttempts {
                // Another server may have what this one lost (`get`'s mirror rule).
                let backoff = Duration.seconds(retry.backoff(afterAttempt: job.attempt, random: random))
                return .retry(reason: ErrorWords.status(status) + from, at: now.addingTimeInterval(wait(backoff)), kind: .http)
            }
            guard (200..<300).contains(status) else {
                return .failed(reason: ErrorWords.status(status) + from + (job.attempt > 1 ? " (after \(job.attempt) attempts)" : ""), kind: .http)
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
        case .failure(let error):
            let kind = DownloadFailureKind(error)
            let words = ErrorWords.describe(error, host: host) + from
            if let delay = decision.delay(after: .failure(error), attempt: job.attempt, now: now, random: random) {
                return .retry(reason: words, at: now.addingTimeInterval(wait(delay)), kind: kind)
            }
            return .failed(reason: words + (job.attempt > 1 ? " (after \(job.attempt) attempts)" : ""), kind: kind)
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
            reason = "\(algorithm.rawValue) mismatch: expected \(checksum.hex.lowercased()), got \(actual); the download was deleted"
        }
        let retry = job.spec.retry
        guard job.attempt < retry.maxAttempts else { return .failed(reason: reason, kind: .checksum) }
        // With mirrors the next server is tried at once, until the list is gone round.
        let count = job.spec.request.urls.count
        let wait = count > 1 && job.attempt % count != 0 ? 0 : retry.backoff(afterAttempt: job.attempt, random: random)
        return .retry(reason: reason + mirrorNote(job), at: now.addingTimeInterval(wait), kind: .checksum)
    }

    /// ` (URL 2 of 3)` for a job with mirrors: which of its URLs the attempt went to.
    private static func mirrorNote(_ job: JobRecord) -> String {
        let count = job.spec.request.urls.count
        return count > 1 ? " (URL \((max(job.attempt, 1) - 1) % count + 1) of \(count))" : ""
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
