public import CurlQueue
import Foundation
import HTTPTypes

/// Adds `Authorization: Basic base64(username:password)` to every request that has no
/// `Authorization` field of its own (a request's own credentials win).
public struct BasicAuthMiddleware: HTTPClientMiddleware {
    let value: String

    /// Creates the middleware. The user name must not hold `:`; both are sent as UTF-8.
    public init(username: String, password: String) {
        value = "Basic " + Data("\(username):\(password)".utf8).base64EncodedString()
    }

    public func intercept(_ request: Request, next: (Request) async throws -> Response) async throws -> Response {
        try await next(request.authorized(with: value))
    }
}
