import Foundation

extension RequestOperation {
    /// The life of one operation, as a value with no I/O in it.
    ///
    /// `RequestOperation` owns one, changes it under its lock, and performs the returned
    /// action after releasing the lock. Every path ends in exactly one `.complete` action:
    /// that is how the completion handler is called exactly once.
    ///
    /// Generic over the handle of a running attempt so that tests can drive it with plain
    /// values instead of libcurl transfers.
    struct StateMachine<Handle>: Sendable where Handle: Sendable {
        enum State {
            /// Made, neither started nor added to a queue.
            case idle
            /// Added to a queue, waiting for its turn.
            case enqueued
            /// An attempt is with the engine.
            case running(attempt: Int, handle: Handle)
            /// Cancelled while running; waiting for the engine to let go of the attempt.
            case cancelling(attempt: Int)
            /// Waiting out the backoff before attempt `attempt + 1`.
            case waitingForRetry(attempt: Int)
            /// The outcome is decided: the one every recipient gets (a streamed body's response
            /// without its body). Boxed so that an operation holds no room for a `Response`
            /// before it has one.
            case finished(SharedValue<Result<Response, RequestError>>)
        }

        enum Action {
            case none
            /// Hand the attempt to the engine.
            case startAttempt(Handle)
            /// Ask the engine to drop the attempt; it reports back with `attemptFinished`.
            case cancelAttempt(Handle)
            /// Call `retryTimerFired` after `delay`.
            case scheduleRetry(attempt: Int, delay: Duration)
            /// Deliver the result. Happens once. Carries the whole outcome, a streamed body's
            /// response with the body kept in memory included, for the stream.
            case complete(Result<Response, RequestError>)
        }

        enum StartError: Error {
            case alreadyStarted
        }

        private(set) var state: State = .idle

        /// The last progress handed to the handlers, kept across attempts, so that they see it
        /// only move forward: never backwards after a retry, never twice the same.
        private(set) var lastDownload: TransferProgress?
        private(set) var lastUpload: TransferProgress?

        var isFinished: Bool {
            if case .finished = state { return true }
            return false
        }

        /// True before the first attempt: idle, or waiting in a queue for its turn.
        var isBeforeFirstAttempt: Bool {
            switch state {
            case .idle, .enqueued: return true
            default: return false
            }
        }

        var isCancelled: Bool {
            switch state {
            case .cancelling: return true
            case .finished(let outcome):
                if case .failure(.cancelled) = outcome.value { return true }
                return false
            default: return false
            }
        }

        /// The outcome once decided, nil before; it never changes after.
        var result: Result<Response, RequestError>? {
            if case .finished(let outcome) = state { return outcome.value }
            return nil
        }

        /// Decides the outcome: the one state that says "finished", and what with.
        private mutating func finish(_ outcome: Result<Response, RequestError>, streamsBody: Bool = false) -> Action {
            var kept = outcome
            if streamsBody, case .success(var response) = outcome {
                response.body = Data()  // it went to the stream
                kept = .success(response)
            }
            state = .finished(SharedValue(kept))
            return .complete(outcome)
        }

        /// Marks the operation as queued. Throws when it was queued or started before.
        mutating func enqueue() throws(StartError) {
            guard case .idle = state else { throw .alreadyStarted }
            state = .enqueued
        }

        /// Starts the first attempt. From `.idle` (standalone start) or `.enqueued` (the queue
        /// gives it its turn); a queued operation that was cancelled meanwhile does not start.
        mutating func start(handle: Handle, fromQueue: Bool) throws(StartError) -> Action {
            switch state {
            case .idle where !fromQueue, .enqueued where fromQueue:
                state = .running(attempt: 1, handle: handle)
                return .startAttempt(handle)
            case .finished where fromQueue:
                return .none
            default:
                throw .alreadyStarted
            }
        }

        /// Cancels from any state. Finished operations are left alone (no second completion).
        mutating func cancel() -> Action {
            switch state {
            case .idle, .enqueued, .waitingForRetry:
                return finish(.failure(.cancelled))
            case .running(let attempt, let handle):
                state = .cancelling(attempt: attempt)
                return .cancelAttempt(handle)
            case .cancelling, .finished:
                return .none
            }
        }

        /// The engine finished an attempt (or let go of a cancelled one). `retryDelay` is the
        /// retry decision for this outcome, computed by the caller from the policy. With
        /// `streamsBody` the body went to a stream: the outcome kept, and read by ``result``,
        /// has an empty body, while `.complete` carries the whole one for the stream.
        mutating func attemptFinished(
            _ outcome: AttemptOutcome, streamsBody: Bool = false, retryDelay: (Int) -> Duration?
        ) -> Action {
            switch state {
            case .cancelling:
                return finish(.failure(.cancelled))
            case .running(let attempt, _):
                if let delay = retryDelay(attempt) {
                    state = .waitingForRetry(attempt: attempt)
                    return .scheduleRetry(attempt: attempt, delay: delay)
                }
                switch outcome {
                case .response(var response):
                    // Set only when it differs: the engine's response already counts its attempt,
                    // and a write to a response still shared with `outcome` copies its values.
                    if response.attempts != attempt { response.attempts = attempt }
                    return finish(.success(response), streamsBody: streamsBody)
                case .failure(let error):
                    return finish(.failure(error))
                }
            case .idle, .enqueued, .waitingForRetry, .finished:
                return .none
            }
        }

        /// The backoff after attempt `attempt` ran out: start the next attempt, unless the
        /// operation was cancelled meanwhile.
        mutating func retryTimerFired(attempt: Int, handle: Handle) -> Action {
            guard case .waitingForRetry(let waiting) = state, waiting == attempt else { return .none }
            state = .running(attempt: attempt + 1, handle: handle)
            return .startAttempt(handle)
        }

        /// An attempt's progress (`download` nil before the response's head): the values to
        /// hand to the progress handlers, nil for one that did not move forward or has no
        /// handler (`reportsDownload`, `reportsUpload`).
        mutating func progressed(
            download: TransferProgress?, upload: TransferProgress, reportsDownload: Bool, reportsUpload: Bool
        ) -> (download: TransferProgress?, upload: TransferProgress?) {
            var reported: (download: TransferProgress?, upload: TransferProgress?) = (nil, nil)
            if reportsDownload, let download, Self.advances(download, from: lastDownload) {
                lastDownload = download
                reported.download = download
            }
            if reportsUpload, Self.advances(upload, from: lastUpload) {
                lastUpload = upload
                reported.upload = upload
            }
            return reported
        }

        private static func advances(_ progress: TransferProgress, from last: TransferProgress?) -> Bool {
            guard let last else { return true }
            if progress.bytesTransferred < last.bytesTransferred { return false }
            return progress.bytesTransferred > last.bytesTransferred || progress.totalBytes != last.totalBytes
        }

        /// The attempt number a new handle would run as, when a retry is due.
        var pendingRetryAttempt: Int? {
            if case .waitingForRetry(let attempt) = state { return attempt + 1 }
            return nil
        }
    }
}
