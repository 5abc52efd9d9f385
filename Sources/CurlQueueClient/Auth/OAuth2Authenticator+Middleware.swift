public import CurlQueue

extension OAuth2Authenticator: HTTPClientMiddleware {
    /// Authorizes the requests this authenticator covers (``authorize(_:send:)``); others pass
    /// through untouched. A call cancelled while held fails with `.transport(.cancelled)`.
    public func intercept(_ request: Request, next: (Request) async throws -> Response) async throws -> Response {
        do {
            return try await authorize(request, send: next)
        } catch RequestError.cancelled {
            throw HTTPClientError.transport(.cancelled)
        }
    }
}
