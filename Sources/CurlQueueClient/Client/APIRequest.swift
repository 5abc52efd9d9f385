public import CurlQueue
public import Foundation
public import HTTPTypes

/// One API call as a value of its own type: its path, method, parameters and what its
/// response decodes to (the Command pattern of YTKNetwork's `YTKRequest`).
///
/// ```swift
/// struct RegisterAPI: APIRequest {
///     typealias Output = Account
///     var username: String, password: String
///     var path: String { "iphone/register" }
///     var method: HTTPRequest.Method { .post }
///     var body: HTTPClient.Body? { .form(["username": username, "password": password]) }
/// }
/// let account = try await client.send(RegisterAPI(username: "ann", password: "s3cret"))
/// ```
///
/// Only ``path`` is required; everything else has a default. How the ``Output`` comes from
/// the response:
/// - `Output == Response`: the response as it is, any status; no validation, no decoding.
/// - any other `Output`: a status outside 200...299 fails with ``HTTPClientError/status(_:)``;
///   then the ``validator``, if any, checks the body; then ``decode(_:using:)`` runs. Its
///   default decodes JSON for a `Decodable` output, returns the body for `Data`, the file for
///   `URL` (with a ``resumableDownloadDestination``), and nothing for ``NoContent``.
public protocol APIRequest: Sendable {
    /// What a successful call produces.
    associatedtype Output: Sendable

    /// The path, relative to the client's base URL (or CDN URL); see ``HTTPClient/url(for:query:useCDN:)``.
    var path: String { get }
    /// The method. Defaults to GET.
    var method: HTTPRequest.Method { get }
    /// Query items, in order; a name may repeat. Defaults to none.
    var query: [URLQueryItem] { get }
    /// Header fields; each replaces the client's defaults of the same name. Defaults to none.
    var headerFields: HTTPFields { get }
    /// The body. Defaults to none.
    var body: HTTPClient.Body? { get }
    /// Whether the call goes to the client's CDN URL instead of its base URL. Defaults to false.
    var useCDN: Bool { get }
    /// The shape the JSON body must have before it is decoded. Defaults to none.
    var validator: JSONValidator? { get }
    /// How long a response may be served from the client's response cache, replacing the
    /// freshness the response's own fields give (YTKNetwork's `cacheTimeInSeconds`), counted
    /// from when the response arrived. `Cache-Control: no-store` still keeps it out. Defaults
    /// to none.
    var cacheTTL: Duration? { get }
    /// How the call uses the client's response cache; `nil` (the default) uses the client's
    /// ``HTTPClient/Configuration/cachePolicy``, then ``HTTPClient/Defaults/cachePolicy``.
    var cachePolicy: CachePolicy? { get }
    /// How HTTPS servers are trusted; `nil` (the default) uses the client's
    /// ``HTTPClient/Configuration/tls``.
    var tls: Request.TLSOptions? { get }
    /// When set, a successful body is downloaded to this file, resuming from
    /// `<file>.part` when an earlier attempt left one (``Request/destination`` with
    /// ``Request/resume``). Defaults to none.
    var resumableDownloadDestination: URL? { get }
    /// Time limits; `nil` (the default) uses the client's
    /// ``HTTPClient/Configuration/timeouts``, then ``HTTPClient/Defaults/timeouts``.
    var timeouts: Request.Timeouts? { get }
    /// Retry settings; `nil` (the default) uses the client's.
    var retry: RetrySettings? { get }

    /// Makes the output from a 2xx response whose body passed the ``validator``.
    /// - Throws: Any error: one that is not an ``HTTPClientError`` becomes
    ///   ``HTTPClientError/decoding(path:message:)``.
    func decode(_ response: Response, using decoder: JSONDecoder) throws -> Output
}

extension APIRequest {
    public var method: HTTPRequest.Method { .get }
    public var query: [URLQueryItem] { [] }
    public var headerFields: HTTPFields { [:] }
    public var body: HTTPClient.Body? { nil }
    public var useCDN: Bool { false }
    public var validator: JSONValidator? { nil }
    public var cacheTTL: Duration? { nil }
    public var cachePolicy: CachePolicy? { nil }
    public var tls: Request.TLSOptions? { nil }
    public var resumableDownloadDestination: URL? { nil }
    public var timeouts: Request.Timeouts? { nil }
    public var retry: RetrySettings? { nil }
}

extension APIRequest where Output: Decodable {
    /// Decodes the body as JSON.
    public func decode(_ response: Response, using decoder: JSONDecoder) throws -> Output {
        try decoder.decode(Output.self, from: response.body)
    }
}

extension APIRequest where Output == Response {
    /// The response itself.
    public func decode(_ response: Response, using decoder: JSONDecoder) throws -> Output { response }
}

extension APIRequest where Output == Data {
    /// The body's bytes.
    public func decode(_ response: Response, using decoder: JSONDecoder) throws -> Output { response.body }
}

extension APIRequest where Output == URL {
    /// The downloaded file (see ``resumableDownloadDestination``).
    public func decode(_ response: Response, using decoder: JSONDecoder) throws -> Output {
        guard let file = response.fileURL else {
            throw HTTPClientError.decoding(path: "$", message: "the response went to no file; set resumableDownloadDestination")
        }
        return file
    }
}

extension APIRequest where Output == NoContent {
    /// Nothing: any body is ignored.
    public func decode(_ response: Response, using decoder: JSONDecoder) throws -> Output { NoContent() }
}

/// The output of a call whose body does not matter: only its 2xx status does.
public struct NoContent: Hashable, Sendable, Decodable {
    /// Creates the value.
    public init() {}
}

/// The ``APIRequest`` behind the client's method-and-path calls.
struct AdHocRequest<Output: Sendable>: APIRequest {
    var method: HTTPRequest.Method
    var path: String
    var query: [URLQueryItem]
    var headerFields: HTTPFields
    var body: HTTPClient.Body?
    let decoder: @Sendable (Response, JSONDecoder) throws -> Output

    func decode(_ response: Response, using decoder: JSONDecoder) throws -> Output {
        try self.decoder(response, decoder)
    }
}

extension AdHocRequest where Output == Response {
    init(_ method: HTTPRequest.Method, _ path: String, query: [URLQueryItem], headerFields: HTTPFields, body: HTTPClient.Body?) {
        self.init(method: method, path: path, query: query, headerFields: headerFields, body: body) { response, _ in response }
    }
}

extension AdHocRequest where Output: Decodable {
    init(_ method: HTTPRequest.Method, _ path: String, query: [URLQueryItem], headerFields: HTTPFields, body: HTTPClient.Body?, as type: Output.Type) {
        self.init(method: method, path: path, query: query, headerFields: headerFields, body: body) { response, decoder in
            try decoder.decode(Output.self, from: response.body)
        }
    }
}
