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

/// Adds a token `Authorization` to every request that has no `Authorization` field of its
/// own: Faraday's `Token token="abc", foo="bar"`, or `Bearer abc`.
public struct TokenAuthMiddleware: HTTPClientMiddleware {
    let value: String

    /// `Authorization: Token token="abc", name="value"…`: the token and the options (in name
    /// order) as quoted strings, with `"` and `\` escaped.
    public init(token: String, options: [String: String] = [:]) {
        let pairs = [("token", token)] + options.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        value = "Token " + pairs.map { "\($0.0)=\"\(Self.escaped($0.1))\"" }.joined(separator: ", ")
    }

    private init(value: String) {
        self.value = value
    }

    /// `Authorization: Bearer abc` (RFC 6750).
    public static func bearer(_ token: String) -> TokenAuthMiddleware {
        TokenAuthMiddleware(value: "Bearer " + token)
    }

    public func intercept(_ request: Request, next: (Request) async throws -> Response) async throws -> Response {
        try await next(request.authorized(with: value))
    }

    private static func escaped(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
    }
}

extension Request {
    /// The request with `Authorization: value`, unless it has one already.
    func authorized(with value: String) -> Request {
        guard headerFields[.authorization] == nil else { return self }
        var request = self
        request.headerFields[.authorization] = value
        return request
    }
}
