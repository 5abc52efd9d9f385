import CurlQueue

extension HTTPClient {
    /// Runs a chain and returns the last call's output, or throws the first failure.
    /// Cancelling the calling task cancels the call running and stops the chain.
    public func send<Output>(_ chain: RequestChain<Output>) async throws(HTTPClientError) -> Output {
        try await chain.run(self)
    }

    /// Runs a chain; `onSuccess` gets the last call's output, `onError` the first failure.
    /// Exactly one of them runs, once, on the callback queue; cancelling the handle stops
    /// the chain with `.transport(.cancelled)`.
    @discardableResult
    public func send<Output>(
        _ chain: RequestChain<Output>, lifetime: RequestHandle.Lifetime = .managed,
        onSuccess: @escaping @Sendable (Output) -> Void,
        onError: @escaping @Sendable (HTTPClientError) -> Void
    ) -> RequestHandle {
        let callbacks = Callbacks<Output>(onStart: nil) { _, result in
            switch result {
            case .success(let output): onSuccess(output)
            case .failure(let error): onError(error)
            }
        }
        return start(lifetime: lifetime, callbacks: callbacks) { [self] () async throws(HTTPClientError) -> Output in
            try await chain.run(self)
        }
    }
}
