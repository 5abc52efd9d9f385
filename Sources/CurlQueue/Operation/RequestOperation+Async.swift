extension RequestOperation {
    /// Starts the operation unless it was started or queued already, and waits for its
    /// outcome. Cancelling the awaiting task cancels the operation.
    ///
    /// Returns the response for any HTTP status. The result may arrive before
    /// ``completionHandler`` has run on its queue.
    /// - Throws: ``RequestError``, ``RequestError/cancelled`` included.
    public func response() async throws(RequestError) -> Response {
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                if addWaiter(continuation) { try? start() }
            }
        } onCancel: {
            cancel()
        }
        return try result.get()
    }
}
