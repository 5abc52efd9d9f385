public import CurlQueue
public import Foundation
public import HTTPTypes

/// The `async` calls: each returns when the call is done and throws ``HTTPClientError``.
/// Cancelling the calling task cancels the call: its transfer leaves the engine and the call
/// throws `.transport(.cancelled)`.
///
/// The calls returning ``Response`` return any status, 404 and 500 included; the calls taking
/// `as:` fail with ``HTTPClientError/status(_:)`` unless the status is 2xx, then decode the
/// body as JSON.
extension HTTPClient {
    /// Sends a request object and returns its output.
    public func send<R: APIRequest>(_ request: R) async throws(HTTPClientError) -> R.Output {
        try await execute(request)
    }

    /// Sends a request with any method and returns the response, whatever its status.
    public func request(
        _ method: HTTPRequest.Method, _ path: String, query: [URLQueryItem] = [], headerFields: HTTPFields = [:],
        body: Body? = nil
    ) async throws(HTTPClientError) -> Response {
        try await execute(AdHocRequest(method, path, query: query, headerFields: headerFields, body: body))
    }

    /// Sends a request with any method and decodes a 2xx response's JSON body as `type`.
    public func request<T: Decodable & Sendable>(
        _ method: HTTPRequest.Method, _ path: String, query: [URLQueryItem] = [], headerFields: HTTPFields = [:],
        body: Body? = nil, as type: T.Type
    ) async throws(HTTPClientError) -> T {
        try await execute(AdHocRequest(method, path, query: query, headerFields: headerFields, body: body, as: type))
    }

    /// GET; the response, whatever its status.
    public func get(_ path: String, query: [URLQueryItem] = [], headerFields: HTTPFields = [:]) async throws(HTTPClientError) -> Response {
        try await request(.get, path, query: query, headerFields: headerFields)
    }

    /// GET; a 2xx response's JSON body decoded as `type`.
    public func get<T: Decodable & Sendable>(
        _ path: String, query: [URLQueryItem] = [], headerFields: HTTPFields = [:], as type: T.Type
    ) async throws(HTTPClientError) -> T {
        try await request(.get, path, query: query, headerFields: headerFields, as: type)
    }

    /// HEAD; the response, whatever its status.
    public func head(_ path: String, query: [URLQueryItem] = [], headerFields: HTTPFields = [:]) async throws(HTTPClientError) -> Response {
        try await request(.head, path, query: query, headerFields: headerFields)
    }

    /// DELETE; the response, whatever its status.
    public func delete(_ path: String, query: [URLQueryItem] = [], headerFields: HTTPFields = [:]) async throws(HTTPClientError) -> Response {
        try await request(.delete, path, query: query, headerFields: headerFields)
    }

    /// DELETE; a 2xx response's JSON body decoded as `type`.
    public func delete<T: Decodable & Sendable>(
        _ path: String, query: [URLQueryItem] = [], headerFields: HTTPFields = [:], as type: T.Type
    ) async throws(HTTPClientError) -> T {
        try await request(.delete, path, query: query, headerFields: headerFields, as: type)
    }

    /// POST; the response, whatever its status.
    public func post(
        _ path: String, query: [URLQueryItem] = [], headerFields: HTTPFields = [:], body: Body? = nil
    ) async throws(HTTPClientError) -> Response {
        try await request(.post, path, query: query, headerFields: headerFields, body: body)
    }

    /// POST; a 2xx response's JSON body decoded as `type`.
    public func post<T: Decodable & Sendable>(
        _ path: String, query: [URLQueryItem] = [], headerFields: HTTPFields = [:], body: Body? = nil, as type: T.Type
    ) async throws(HTTPClientError) -> T {
        try await request(.post, path, query: query, headerFields: headerFields, body: body, as: type)
    }

    /// PUT; the response, whatever its status.
    public func put(
        _ path: String, query: [URLQueryItem] = [], headerFields: HTTPFields = [:], body: Body? = nil
    ) async throws(HTTPClientError) -> Response {
        try await request(.put, path, query: query, headerFields: headerFields, body: body)
    }

    /// PUT; a 2xx response's JSON body decoded as `type`.
    public func put<T: Decodable & Sendable>(
        _ path: String, query: [URLQueryItem] = [], headerFields: HTTPFields = [:], body: Body? = nil, as type: T.Type
    ) async throws(HTTPClientError) -> T {
        try await request(.put, path, query: query, headerFields: headerFields, body: body, as: type)
    }

    /// PATCH; the response, whatever its status.
    public func patch(
        _ path: String, query: [URLQueryItem] = [], headerFields: HTTPFields = [:], body: Body? = nil
    ) async throws(HTTPClientError) -> Response {
        try await request(.patch, path, query: query, headerFields: headerFields, body: body)
    }

    /// PATCH; a 2xx response's JSON body decoded as `type`.
    public func patch<T: Decodable & Sendable>(
        _ path: String, query: [URLQueryItem] = [], headerFields: HTTPFields = [:], body: Body? = nil, as type: T.Type
    ) async throws(HTTPClientError) -> T {
        try await request(.patch, path, query: query, headerFields: headerFields, body: body, as: type)
    }
}
