extension RequestQueue {
    /// Adds an operation for `request` and waits for its outcome. Cancelling the awaiting
    /// task cancels the operation.
    /// - Throws: ``RequestError``, ``RequestError/cancelled`` included.
    public func response(for request: Request) async throws(RequestError) -> Response {
        let operation = RequestOperation(request: request)
        try! add(operation)  // a new operation cannot have been started
        return try await operation.response()
    }

    /// Returns once the queue is empty: no operation running or pending.
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
