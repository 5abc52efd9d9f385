import Foundation
public import HTTPTypes
public import Logging

/// Logs every request and its outcome through swift-log, with secrets redacted.
///
/// Two entries per call: `→ GET https://…` when the request goes out, then
/// `← 200 GET https://… 12 ms` (or `✕ GET https://… failed: …` at `failureLevel`), with
/// metadata `method`, `url`, `status`, `duration_ms`, `request_bytes`, `response_bytes`
/// and the header fields. Bodies are never logged.
///
/// Redacted (a field value shown as `<redacted>`, a query value or password as `REDACTED`): the values of `Authorization`, `Proxy-Authorization`,
/// `Cookie` and `Set-Cookie` and of any field in `redactedHeaderNames`; the values of query
/// parameters whose name is in `redactedQueryNames` (compared without case); a password in
/// the URL. As it sits at its place in the stack, put it last (after auth middleware) to log
/// what goes on the wire.
public struct LoggingMiddleware: HTTPClientMiddleware {
    /// The query parameter names redacted by default.
    public static let defaultRedactedQueryNames: Set<String> = [
        "token", "access_token", "refresh_token", "id_token", "api_key", "apikey", "key", "secret",
        "client_secret", "password", "passwd", "signature", "sig", "auth", "code", "session",
        // Presigned S3 and Google Cloud Storage URLs: each grants access until it expires.
        "x-amz-signature", "x-amz-security-token", "x-goog-signature",
    ]

    let logger: Logger
    let level: Logger.Level
    let failureLevel: Logger.Level
    let redactedHeaderNames: Set<HTTPField.Name>
    let redactedQueryNames: Set<String>

    /// Creates the middleware.
    /// - Parameters:
    ///   - logger: Where entries go.
    ///   - level: The level of the request and response entries.
    ///   - failureLevel: The level of the entry for a call that got no response.
    ///   - redactedHeaderNames: Fields whose values are hidden, besides the four always hidden.
    ///   - redactedQueryNames: Query parameters whose values are hidden.
    public init(
        logger: Logger, level: Logger.Level = .info, failureLevel: Logger.Level = .warning,
        redactedHeaderNames: Set<HTTPField.Name> = [],
        redactedQueryNames: Set<String> = LoggingMiddleware.defaultRedactedQueryNames
    ) {
        self.logger = logger
        self.level = level
        self.failureLevel = failureLevel
        self.redactedHeaderNames = redactedHeaderNames.union([.authorization, .proxyAuthorization, .cookie, .setCookie])
        self.redactedQueryNames = Set(redactedQueryNames.map { $0.lowercased() })
    }

    public func intercept(_ request: Request, next: (Request) async throws -> Response) async throws -> Response {
        let url = redacted(request.url)
        let method = request.method.rawValue
        var metadata: Logger.Metadata = [
            "method": "\(method)", "url": "\(url)", "request_headers": fields(request.headerFields),
        ]
        if let bytes = request.bodySize { metadata["request_bytes"] = "\(bytes)" }
        logger.log(level: level, "→ \(method) \(url)", metadata: metadata)
        let clock = ContinuousClock()
        let started = clock.now
        do {
            let response = try await next(request)
            let elapsed = clock.now - started
            metadata["status"] = "\(response.status.code)"
            metadata["duration_ms"] = "\(Self.milliseconds(elapsed))"
            metadata["response_bytes"] = "\(max(Int64(response.body.count), response.metrics.bytesReceived))"
            metadata["response_headers"] = fields(response.headerFields)
            logger.log(level: level, "← \(response.status.code) \(method) \(url) \(Self.milliseconds(elapsed)) ms", metadata: metadata)
            return response
        } catch {
            metadata["duration_ms"] = "\(Self.milliseconds(clock.now - started))"
            metadata["error"] = "\(error)"
            logger.log(level: failureLevel, "✕ \(method) \(url) failed: \(error)", metadata: metadata)
            throw error
        }
    }

    private static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    private func fields(_ fields: HTTPFields) -> Logger.MetadataValue {
        .array(fields.map { field in
            .string("\(field.name.rawName): \(redactedHeaderNames.contains(field.name) ? "<redacted>" : field.value)")
        })
    }

    /// The URL with redacted query values and without a password.
    func redacted(_ url: URL) -> String {
        Self.redacted(url, queryNames: redactedQueryNames)
    }

    /// `url` with the values of the query parameters named in `queryNames` (lowercased) and
    /// any password replaced by `REDACTED`: what logs and error descriptions may show.
    static func redacted(_ url: URL, queryNames: Set<String> = defaultRedactedQueryNames) -> String {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return "<unparsable URL>" }
        if components.password != nil { components.password = "REDACTED" }
        if let query = components.percentEncodedQuery {
            components.percentEncodedQuery = query.split(separator: "&", omittingEmptySubsequences: false).map { pair in
                guard let equals = pair.firstIndex(of: "=") else { return String(pair) }
                let name = pair[..<equals].removingPercentEncoding ?? String(pair[..<equals])
                let plainName = name.replacingOccurrences(of: "+", with: " ").lowercased()
                return queryNames.contains(plainName) ? "\(pair[..<equals])=REDACTED" : String(pair)
            }.joined(separator: "&")
        }
        return components.string ?? "<unparsable URL>"
    }
}
