public import CurlQueue
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
/// Redacted by its ``SecretRedactor`` (a field value shown as `<redacted>`, a query value and
/// the URL's userinfo as `REDACTED`): every field and query parameter whose name looks secret
/// (`X-Api-Key`, `X-Auth-Token`, `private_token`, `client_secret`, …: see ``SecretRedactor``
/// for the rule), all of the userinfo (`https://TOKEN@host/`), secret pairs in the fragment;
/// and always `Authorization`, `Proxy-Authorization`, `Cookie`, `Set-Cookie` and the names in
/// `redactedHeaderNames` and `redactedQueryNames`. The error text of a failed call is the
/// error's description, which redacts URLs the same way. As it sits at its place in the stack,
/// put it last (after auth middleware) to log what goes on the wire.
public struct LoggingMiddleware: HTTPClientMiddleware {
    /// Query parameter names redacted before ``SecretRedactor`` existed; its standard
    /// redactor hides all of them (and more), so they need not be passed.
    public static let defaultRedactedQueryNames: Set<String> = [
        "token", "access_token", "refresh_token", "id_token", "api_key", "apikey", "key", "secret",
        "client_secret", "password", "passwd", "signature", "sig", "auth", "code", "session",
        // Presigned S3 and Google Cloud Storage URLs: each grants access until it expires.
        "x-amz-signature", "x-amz-security-token", "x-goog-signature",
    ]

    let logger: Logger
    let level: Logger.Level
    let failureLevel: Logger.Level
    let redactor: SecretRedactor

    /// Creates the middleware.
    /// - Parameters:
    ///   - logger: Where entries go.
    ///   - level: The level of the request and response entries.
    ///   - failureLevel: The level of the entry for a call that got no response.
    ///   - redactor: Which field and query values are hidden (``SecretRedactor/standard``
    ///     by default); make one with ``SecretRedactor/redacting(_:)`` or
    ///     ``SecretRedactor/keeping(_:)`` to add or remove names.
    ///   - redactedHeaderNames: Fields whose values are hidden too, whatever `redactor` says,
    ///     besides the four always hidden.
    ///   - redactedQueryNames: Query parameters whose values are hidden too.
    public init(
        logger: Logger, level: Logger.Level = .info, failureLevel: Logger.Level = .warning,
        redactor: SecretRedactor = .standard,
        redactedHeaderNames: Set<HTTPField.Name> = [],
        redactedQueryNames: Set<String> = []
    ) {
        self.logger = logger
        self.level = level
        self.failureLevel = failureLevel
        let alwaysHidden: Set<HTTPField.Name> = [.authorization, .proxyAuthorization, .cookie, .setCookie]
        self.redactor = redactor.redacting(redactedQueryNames).redacting(redactedHeaderNames.union(alwaysHidden).map(\.canonicalName))
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
        .array(redactor.redact(fields).map { .string($0) })
    }

    /// The URL as this middleware logs it.
    func redacted(_ url: URL) -> String {
        redactor.redact(url)
    }

    /// `url` as error descriptions show it: ``SecretRedactor/standard``'s redaction.
    static func redacted(_ url: URL) -> String {
        SecretRedactor.standard.redact(url)
    }
}
