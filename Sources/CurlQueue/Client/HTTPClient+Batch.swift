/// Batches (YTKNetwork's `YTKBatchRequest`): several calls at once, done when all are done.
///
/// **Fail fast** by default, as YTKBatchRequest: the first call that fails cancels the
/// others still running, whose results are then `.transport(.cancelled)`. With
/// `failFast: false` every call runs to its own end. Either way the results come back in the
/// order of the requests, one per request. A call whose ``APIRequest/Output`` is ``Response``
/// fails only on a transport error: a 500 is its success.
extension HTTPClient {
    /// Sends every request at once (within the queue's limits) and returns each result.
    /// Cancelling the calling task cancels every call.
    public func batch<R: APIRequest>(_ requests: [R], failFast: Bool = true) async -> [Result<R.Output, HTTPClientError>] {
        await withTaskGroup(of: (Int, Result<R.Output, HTTPClientError>).self) { group in
            for (index, request) in requests.enumerated() {
                group.addTask {
                    do throws(HTTPClientError) {
                        return (index, .success(try await self.execute(request)))
                    } catch {
                        return (index, .failure(error))
                    }
                }
            }
            var results = [Result<R.Output, HTTPClientError>?](repeating: nil, count: requests.count)
            var failed = false
            for await (index, result) in group {
                results[index] = result
                if failFast, !failed, case .failure = result {
                    failed = true
                    group.cancelAll()
                }
            }
            return results.map { $0! }
        }
    }

    /// Sends every request at once and calls `onFinish` with each result, in request order,
    /// once all are done. `onFinish` runs once, on the callback queue. Cancelling the handle
    /// cancels every call still running: their results are `.transport(.cancelled)`, while
    /// calls already done keep theirs.
    @discardableResult
    public func batch<R: APIRequest>(
        _ requests: [R], failFast: Bool = true, lifetime: RequestHandle.Lifetime = .managed,
        onFinish: @escaping @Sendable ([Result<R.Output, HTTPClientError>]) -> Void
    ) -> RequestHandle {
        var callbacks = Callbacks<[Result<R.Output, HTTPClientError>]>(onStart: nil) { _, outcome in
            switch outcome {
            case .success(let results): onFinish(results)
            case .failure(let error): onFinish(requests.map { _ in .failure(error) })  // never: the batch itself cannot fail
            }
        }
        callbacks.cancellationReplacesOutcome = false
        return start(lifetime: lifetime, callbacks: callbacks) { [self] () async throws(HTTPClientError) in
            await batch(requests, failFast: failFast)
        }
    }
}
