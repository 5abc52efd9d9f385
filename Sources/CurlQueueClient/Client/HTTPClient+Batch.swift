import CurlQueue

/// Batches (YTKNetwork's `YTKBatchRequest`): several calls at once, done when all are done.
///
/// **Fail fast** by default, as YTKBatchRequest: the first call that fails cancels the
/// others still running, whose results are then `.transport(.cancelled)`. With
/// `failFast: false` every call runs to its own end. Either way the results come back in the
/// order of the requests, one per request. A call whose ``APIRequest/Output`` is ``Response``
/// fails only on a transport error: a 500 is its success.
///
/// `onEach`, if given, follows the batch as it goes: it runs once per call, as that call ends
/// (in the order they end, with the call's index in `requests`), after the batch recorded the
/// result and, failing fast, after it cancelled the calls still running.
extension HTTPClient {
    /// Sends every request at once (within the queue's limits) and returns each result.
    /// Cancelling the calling task cancels every call.
    ///
    /// `onEach` runs on the calling task, before the next result is taken: keep it short.
    public func batch<R: APIRequest>(
        _ requests: [R], failFast: Bool = true,
        onEach: (@Sendable (Int, Result<R.Output, HTTPClientError>) -> Void)? = nil
    ) async -> [Result<R.Output, HTTPClientError>] {
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
                onEach?(index, result)
            }
            return results.map { $0! }
        }
    }

    /// Sends every request at once and calls `onFinish` with each result, in request order,
    /// once all are done. `onFinish` runs once, on the callback queue. Cancelling the handle
    /// cancels every call still running: their results are `.transport(.cancelled)`, while
    /// calls already done (those `onEach` was queued for) keep theirs.
    ///
    /// `onEach` runs on the callback queue too; on a serial one (the default) every `onEach`
    /// runs before `onFinish`. A cancelled handle's batch still reports each call's end.
    @discardableResult
    public func batch<R: APIRequest>(
        _ requests: [R], failFast: Bool = true, lifetime: RequestHandle.Lifetime = .managed,
        onEach: (@Sendable (Int, Result<R.Output, HTTPClientError>) -> Void)? = nil,
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
            var report: (@Sendable (Int, Result<R.Output, HTTPClientError>) -> Void)?
            if let onEach {
                let queue = configuration.callbackQueue
                report = { index, result in queue.async { onEach(index, result) } }
            }
            return await batch(requests, failFast: failFast, onEach: report)
        }
    }
}
