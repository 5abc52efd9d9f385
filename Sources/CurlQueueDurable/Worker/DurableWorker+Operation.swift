import CurlQueue
import CurlQueueDownloads
import Foundation

extension DurableWorker {
    /// The operation for a claimed job, with its completion feeding `continuation`; nil when
    /// the request cannot be made (the outcome is sent at once then).
    func makeOperation(_ job: ClaimedJob, continuation: AsyncStream<Event>.Continuation) async -> RequestOperation? {
        let id = job.lease.job
        let record = job.record
        var extra: [JobRequest.Field] = []
        if let credential = record.spec.credential {
            let provider = registryCredentials()
            do {
                guard let provider else { throw CredentialUnavailable() }
                extra += try await provider(credential, record)
            } catch {
                let reason = "credential \(credential) unavailable: \(error)"
                let outcome: JobOutcome = record.attempt < record.spec.retry.maxAttempts
                    ? .retry(reason: reason, at: Date().addingTimeInterval(record.spec.retry.backoff(afterAttempt: record.attempt, random: .random(in: 0..<1))), kind: .other)
                    : .failed(reason: reason, kind: .other)
                continuation.yield(.transferEnded(id, outcome, nil))
                return nil
            }
        }
        if let key = record.spec.idempotencyKey { extra.append(.init("Idempotency-Key", key)) }
        var request: Request
        switch record.spec.request.request(folder: configuration.folder, extraFields: extra, attempt: record.attempt) {
        case .success(let made): request = made
        case .failure(let error):
            continuation.yield(.transferEnded(id, .failed(reason: error.description, kind: .other), nil))
            return nil
        }
        configuration.prepareRequest?(&request, record)
        if let destination = request.destination {
            // The job's folders under the worker's, never through a symbolic link.
            if let staged = record.spec.request.stagedDestination,
               let problem = Subfolders.make(of: staged, in: configuration.folder.path) {
                continuation.yield(.transferEnded(id, .failed(reason: problem, kind: .file), nil))
                return nil
            }
            if request.resume {
                request.keepsValidatorOnFile = true  // until the outcome is recorded
                if !reclaimUnrecordedFile(destination.path, job: id) {
                    checkPartAfterReboot(destination.path + ".part", checkpoint: record.checkpoint, job: id)
                }
            }
            Self.keepPartOnlyFromItsServer(&request, job: record)
            // What stands under the name is never replaced (`curlq get`'s rule): it is checked
            // instead, and the job ends with that check (DurableWorker+ExistingFile.swift).
            switch existingFile(request, job: record, continuation: continuation) {
            case .absent: break
            case .check(let operation): return operation
            case .decided: return nil
            }
        }
        let operation = RequestOperation(request: request)
        operation.priority = RequestOperation.Priority(rawValue: record.spec.priority.rawValue) ?? .normal
        operation.autoRetry = false  // retries go through the store, which keeps their schedule
        let bootID = configuration.bootID
        let registry = self.registry
        let final = record.spec.request.destination.map { configuration.folder.appendingPathComponent($0) }
        let replacing = configuration.replacesExistingFiles
        if request.destination != nil {
            operation.downloadProgressHandler = { progress in
                let now = ContinuousClock.now
                registry.withLock { registry in
                    if let total = progress.totalBytes, total > 0 { registry.totals[id] = total }
                    if registry.live[id] == nil {
                        registry.live[id] = LiveSample(
                            progress: Progress(bytes: progress.bytesTransferred, total: progress.totalBytes),
                            windowStart: (progress.bytesTransferred, now))
                    }
                    registry.live[id]?.report(progress, at: now)
                }
            }
        }
        operation.completionHandler = { result in
            registry.withLock { registry in
                registry.totals[id] = nil
                registry.lastSamples[id] = nil
                registry.live[id] = nil
            }
            let outcome = Self.outcome(of: result, job: record, now: Date(), random: .random(in: 0..<1))
            let response = try? result.get()
            if let file = response?.fileURL {
                if case .completed = outcome { Self.markFinished(file, bootID: bootID, job: id) }
                // Hashing and fsync wait for the disk: on a thread of their own, never the
                // cooperative pool's (as the checkpoints).
                DispatchQueue.global(qos: .utility).async {
                    var checked = Self.verified(outcome, file: file, digests: response?.fileDigests ?? [:], job: record,
                                                now: Date(), random: .random(in: 0..<1))
                    if case .completed = checked, let final = final, final != file {
                        checked = Self.placeVerified(file, at: final, outcome: checked, job: id, replacing: replacing)
                    }
                    if case .completed = checked { Self.flush(final ?? file) }
                    continuation.yield(.transferEnded(id, checked, checked == outcome ? response : nil))
                }
            } else {
                continuation.yield(.transferEnded(id, outcome, response))
            }
        }
        return operation
    }

    private func registryCredentials() -> CredentialProvider? {
        credentialProvider()
    }
}

struct CredentialUnavailable: Error, CustomStringConvertible {
    var description: String { "no credential provider" }
}
