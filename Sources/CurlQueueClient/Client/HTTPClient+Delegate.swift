import CurlQueue

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
