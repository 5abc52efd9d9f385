public import CurlQueue
import Foundation
import HTTPTypes

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
