import Foundation

extension RequestOperation: AttemptDelegate {
    /// Before the response's head (`download` nil) only the upload handler is called, and the
    /// queue's events hear nothing: an event carries both values.
    func attempt(_ attempt: Attempt, didProgressDownload download: TransferProgress?, upload: TransferProgress) {
        let (queue, downloadHandler, uploadHandler, observer) = state.withLock { state in
            let reported = state.machine.progressed(
                download: download, upload: upload,
                reportsDownload: state.downloadProgressHandler != nil, reportsUpload: state.uploadProgressHandler != nil)
            return (state.callbackQueue, reported.download == nil ? nil : state.downloadProgressHandler,
                    reported.upload == nil ? nil : state.uploadProgressHandler, state.observer)
        }
        if let download { observer?(.progress(download: download, upload: upload)) }
        guard downloadHandler != nil || uploadHandler != nil else { return }
        queue.async {
            if let download { downloadHandler?(download) }
            uploadHandler?(upload)
        }
    }

    func attempt(_ attempt: Attempt, didFinishWith outcome: AttemptOutcome) {
        let action = state.withLock { state in
            // A streamed body's consumer has had the head, maybe bytes: no attempt may follow.
            // (The operation's stream, the transfer has let go of its own; its lock is never
            // held while one of an operation is taken.)
            let streamBegun = state.bodyStream?.hasBegun ?? false
            let decision = RetryDecision(
                autoRetry: state.autoRetry && !streamBegun, errorCodes: state.autoRetryErrorCodes, policy: state.retryPolicy)
            // A streamed request body partly sent cannot be sent again: a retry due fails instead.
            if decision.autoRetry, case .stream(let body)? = request.body,
               decision.delay(after: outcome, attempt: attempt.number, now: Date(), random: 0) != nil,
               let refusal = body.channel.retryRefusal(after: outcome, attempt: attempt.number) {
                return state.machine.attemptFinished(.failure(refusal)) { _ in nil }
            }
            let action = state.machine.attemptFinished(outcome, streamsBody: state.bodyStream != nil) { attempt in
                // The clock and the random source (a getrandom call) only when a retry may follow.
                guard decision.autoRetry else { return nil }
                return decision.delay(after: outcome, attempt: attempt, now: Date(), random: Double.random(in: 0..<1))
            }
            if case .scheduleRetry(let number, _) = action { Self.noteRetry(number, after: outcome, in: &state) }
            return action
        }
        perform(action)
    }
}
