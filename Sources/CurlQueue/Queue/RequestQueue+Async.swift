extension RequestQueue {
    /// Adds an operation for `request` and waits for its outcome. Cancelling the awaiting
    /// task cancels the operation.
    ///
    /// To await many requests, `responses(for:)` costs less than a task per request calling
    /// this: one task takes every outcome of the batch as it comes.
    /// - Throws: ``RequestError``, ``RequestError/cancelled`` included.
    public func response(for request: Request) async throws(RequestError) -> Response {
        let operation = RequestOperation(request: request)
        try! add(operation)  // a new operation cannot have been started
        return try await operation.response()
    }

    /// Adds an operation for `request` and returns as soon as the head of its final response
    /// arrived, with the body still arriving as ``StreamingResponse/body``: chunks in order,
    /// bounded in memory (the transfer pauses while the consumer is behind), and no retry once
    /// the head is handed over. Leaving the body's loop early, dropping the response, or
    /// cancelling the awaiting or iterating task cancels the operation, which frees its slot in
    /// the queue. See ``StreamingResponse`` for the contracts.
    ///
    /// The operation keeps its slot in the queue until the body has ended.
    /// - Throws: The ``RequestError`` that ended the operation before the head arrived,
    ///   ``RequestError/cancelled`` included.
    public func stream(_ request: Request) async throws(RequestError) -> StreamingResponse {
        try await stream(RequestOperation(request: request))
    }

    /// Adds `operation`, an operation configured by the caller (retry policy, handlers), and
    /// returns as `stream(_:)` with a ``Request`` does. Unlike adding it and then calling its
    /// ``RequestOperation/stream()``, the stream is in place before the queue can start it.
    ///
    /// An operation some queue holds already (not started yet) is streamed from that queue.
    /// - Throws: As `stream(_:)` with a ``Request``; ``RequestError/invalidRequest(_:)`` when the
    ///   operation was started before, or streams already.
    public func stream(_ operation: RequestOperation) async throws(RequestError) -> StreamingResponse {
        let (stream, idle) = try operation.installPullStream()
        if idle {
            // Fails only if the operation was started meanwhile elsewhere: the stream, in
            // place before that, delivers its outcome all the same.
            try? add(operation)
        }
        return try await operation.streamingResponse(stream)
    }

    /// Returns once the queue is empty: no operation running or pending.
    ///
    /// Every operation's outcome is decided by then, but the completion handlers of the last
    /// ones may still be waiting for, or running on, their callback queues: to know that a
    /// handler ran, have the handler say so.
    public func waitUntilAllOperationsAreFinished() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let empty = state.withLock { state in
                if state.scheduler.count == 0 { return true }
                state.idleWaiters.append(continuation)
                return false
            }
            if empty { continuation.resume() }
        }
    }
}
