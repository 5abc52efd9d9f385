/// Receives the events of client calls started with ``HTTPClient/send(_:lifetime:delegate:)``.
///
/// The client holds its delegate **weakly**: a delegate usually owns the handles of its
/// calls (a screen and its requests), and a strong reference back would keep it alive. A call
/// whose delegate is gone still runs (a managed one to its end) but reports to no one.
///
/// Methods run on the client's ``HTTPClient/Configuration/callbackQueue``, never on the engine
/// thread and never under a lock. For every call, `didStart` comes first, then exactly one of
/// `didSucceed` and `didFail`.
public protocol HTTPClientDelegate: AnyObject, Sendable {
    /// The call has started. Does nothing by default.
    func httpClient(_ client: HTTPClient, didStart call: RequestHandle.ID)
    /// The call succeeded with `output`: the request's ``APIRequest/Output`` (a ``Response``
    /// for raw calls); cast it to the type you expect.
    func httpClient(_ client: HTTPClient, call: RequestHandle.ID, didSucceedWith output: any Sendable)
    /// The call failed, or was cancelled (`.transport(.cancelled)`).
    func httpClient(_ client: HTTPClient, call: RequestHandle.ID, didFailWith error: HTTPClientError)
}

extension HTTPClientDelegate {
    public func httpClient(_ client: HTTPClient, didStart call: RequestHandle.ID) {}
}

extension HTTPClient {
    /// Sends a request object and reports to `delegate`, which is held weakly.
    @discardableResult
    public func send<R: APIRequest>(
        _ request: R, lifetime: RequestHandle.Lifetime = .managed, delegate: any HTTPClientDelegate
    ) -> RequestHandle {
        let callbacks = Callbacks<R.Output>(onStart: { [self, weak delegate] id in
            delegate?.httpClient(self, didStart: id)
        }, onOutcome: { [self, weak delegate] id, result in
            switch result {
            case .success(let output): delegate?.httpClient(self, call: id, didSucceedWith: output)
            case .failure(let error): delegate?.httpClient(self, call: id, didFailWith: error)
            }
        })
        return start(request, lifetime: lifetime, callbacks: callbacks)
    }
}
