import CurlQueue

/// Calls made one after the other, each built from the output of the one before
/// (YTKNetwork's `YTKChainRequest`). The chain stops at the first failure, which is its
/// outcome; later steps are never built or sent.
///
/// ```swift
/// let chain = RequestChain(RegisterAPI(username: "ann", password: "s3cret"))
///     .then { account in GetUserInfoAPI(userID: account.id) }
/// let user = try await client.send(chain)
/// ```
public struct RequestChain<Output: Sendable>: Sendable {
    let run: @Sendable (HTTPClient) async throws(HTTPClientError) -> Output

    init(run: @escaping @Sendable (HTTPClient) async throws(HTTPClientError) -> Output) {
        self.run = run
    }

    /// A chain whose first call is `first`.
    public init<R: APIRequest>(_ first: R) where R.Output == Output {
        run = { client throws(HTTPClientError) in try await client.execute(first) }
    }

    /// The chain followed by the call `next` builds from its output. `next` runs in the
    /// chain's task; it may throw to end the chain with that error.
    public func then<R: APIRequest>(_ next: @escaping @Sendable (Output) throws(HTTPClientError) -> R) -> RequestChain<R.Output> {
        let previous = run
        return RequestChain<R.Output> { client throws(HTTPClientError) in
            let output = try await previous(client)
            if Task.isCancelled { throw .transport(.cancelled) }
            return try await client.execute(try next(output))
        }
    }
}
