extension RequestOperation {
    /// The outcome once it is decided, nil before. Once non-nil it never changes. It may be
    /// set before ``completionHandler`` has run on its queue. Read under the operation's lock,
    /// which the thread that decided it released after storing it: a task resumed once the
    /// outcome is decided reads it here (see ``response()`` for why).
    public var result: Result<Response, RequestError>? {
        state.withLock { $0.machine.result }
    }

    /// Starts the operation unless it was started or queued already, and waits for its
    /// outcome. Cancelling the awaiting task cancels the operation.
    ///
    /// Returns the response for any HTTP status. The result may arrive before
    /// ``completionHandler`` has run on its queue.
    /// - Throws: ``RequestError``, ``RequestError/cancelled`` included.
    public func response() async throws(RequestError) -> Response {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                if addWaiter(continuation) { try? start() }
            }
        } onCancel: {
            cancel()
        }
        // The outcome is read under the operation's lock, not carried by the continuation. The
        // response is made on the engine thread, which resumes this task after storing it
        // under the lock. When the resume comes before the task suspends (the transfer ended
        // while `start()` returned), Swift's runtime lets the task go on at once, ordered by
        // an atomic of its own that ThreadSanitizer does not see (it tells the sanitizer of a
        // resume only when the resumed task is run as a new job): a response passed in the
        // continuation was then read "racing" with its making (seen in a full run). The lock
        // is an edge the sanitizer sees, in every case.
        guard let outcome = result else { preconditionFailure("resumed before the outcome was decided") }
        return try outcome.get()
    }
}

extension RequestOperation {
    /// Starts the operation unless it is queued already, and returns as soon as the head of
    /// the final response arrived, with its body still arriving: see ``StreamingResponse`` for
    /// the contracts (order, backpressure, no retry once the head is handed over, cancellation).
    ///
    /// Call it instead of ``response()``, on an operation that was not started (or that a
    /// queue holds but has not started yet). The stream takes the place of
    /// ``responseBodyHandler``, and of the request's `destination`; ``completionHandler``
    /// still runs once, after the body's end, with an empty ``Response/body``.
    /// Cancelling the awaiting task cancels the operation.
    /// - Throws: The ``RequestError`` that ended the operation before the head arrived,
    ///   ``RequestError/cancelled`` included; ``RequestError/invalidRequest(_:)`` when the
    ///   operation was started before, or streams already.
    public func stream() async throws(RequestError) -> StreamingResponse {
        let (stream, startNow) = try installPullStream()
        if startNow { try? start() }
        return try await streamingResponse(stream)
    }

    /// Gives the operation a pulled body stream, before its first transfer is made. Returns
    /// whether the operation is idle (the caller starts it) rather than queued.
    func installPullStream() throws(RequestError) -> (BodyStream, idle: Bool) {
        let stream = BodyStream(mode: .pull)
        let idle = try state.withLock { state throws(RequestError) -> Bool in
            guard state.bodyStream == nil else { throw .invalidRequest("the operation streams its body already") }
            switch state.machine.state {
            case .idle:
                state.bodyStream = stream
                return true
            case .enqueued:
                state.bodyStream = stream
                return false
            default:
                throw .invalidRequest("stream() needs an operation that has not started")
            }
        }
        return (stream, idle)
    }

    /// Waits for the head handed to `stream`.
    func streamingResponse(_ stream: BodyStream) async throws(RequestError) -> StreamingResponse {
        let head = await withTaskCancellationHandler {
            await stream.head()
        } onCancel: {
            cancel()
        }
        return StreamingResponse(head: try head.get(), stream: stream, operation: self)
    }
}
