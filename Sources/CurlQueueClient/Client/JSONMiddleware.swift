public import CurlQueue
import Foundation
import HTTPTypes

/// Makes a JSON API's requests say so: `Accept: application/json` on every request and
/// `Content-Type: application/json` on every request with a body, unless the request already
/// has them. With `requireJSONResponse`, a 2xx response with a body whose `Content-Type` is not
/// JSON (`application/json` or `…+json`) fails with ``HTTPClientError/decoding(path:message:)``
/// before anything tries to decode it.
public struct JSONMiddleware: HTTPClientMiddleware {
    /// Whether a 2xx response with a body must be labelled JSON.
    public var requireJSONResponse: Bool

    /// Creates the middleware.
    public init(requireJSONResponse: Bool = false) {
        self.requireJSONResponse = requireJSONResponse
    }

    public func intercept(_ request: Request, next: (Request) async throws -> Response) async throws -> Response {
        var request = request
        if request.headerFields[.accept] == nil {
            request.headerFields[.accept] = "application/json"
        }
        if request.body != nil, request.headerFields[.contentType] == nil {
            request.headerFields[.contentType] = "application/json"
        }
        let response = try await next(request)
        if requireJSONResponse, (200...299).contains(response.status.code), !response.body.isEmpty {
            let type = response.headerFields[.contentType] ?? ""
            let mediaType = type.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
            guard mediaType == "application/json" || mediaType.hasSuffix("+json") else {
                throw HTTPClientError.decoding(path: "$", message: "the response is \(type.isEmpty ? "unlabelled" : type.debugDescription), not JSON")
            }
        }
        return response
    }
}
