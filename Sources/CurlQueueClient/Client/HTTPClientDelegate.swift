import CurlQueue

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
