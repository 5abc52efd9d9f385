import CurlQueue
import CurlQueueClient
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import HTTPTypes
import Logging
import Testing

/// A LogHandler that keeps every entry, message and metadata, as text.
struct CapturingLogHandler: LogHandler {
    let lines: LockedBox<[String]>
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let metadata = (event.metadata ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        lines.update { $0.append("\(event.level) \(event.message) \(metadata)") }
    }
}

/// The logging middleware: what it logs, and that secrets never reach the log.
@Suite struct HTTPClientLoggingTests {
    @Test func secretsNeverAppearInTheLog() async throws {
        try await withServer { (server) async throws in
            let lines = LockedBox<[String]>([])
            let logger = Logger(label: "test") { _ in CapturingLogHandler(lines: lines) }
            let client = makeClient(server, middleware: [
                BasicAuthMiddleware(username: "ann", password: "BASIC-SECRET"),
                LoggingMiddleware(logger: logger),
            ])
            var fields: HTTPFields = [.cookie: "session=COOKIE-SECRET"]
            fields[.proxyAuthorization] = "Basic PROXY-SECRET"
            fields[HTTPField.Name("X-Visible")!] = "shown"
            let response = try await client.get("set-cookie", query: [
                URLQueryItem(name: "session", value: "SETCOOKIE-SECRET"),
                URLQueryItem(name: "access_token", value: "QUERY-SECRET"),
                URLQueryItem(name: "API_KEY", value: "KEY-SECRET"),
                URLQueryItem(name: "page", value: "2"),
            ], headerFields: fields)
            #expect(response.status == .ok)
            let log = lines.value.joined(separator: "\n")
            let basic = Data("ann:BASIC-SECRET".utf8).base64EncodedString()
            for secret in ["BASIC-SECRET", basic, "COOKIE-SECRET", "PROXY-SECRET", "SETCOOKIE-SECRET", "QUERY-SECRET", "KEY-SECRET"] {
                #expect(!log.contains(secret), "\(secret) leaked into the log:\n\(log)")
            }
            #expect(lines.value.count == 2)
            #expect(log.contains("→ GET http://127.0.0.1:\(server.port)/set-cookie?session=REDACTED&"))
            #expect(log.contains("access_token=REDACTED"))
            #expect(log.contains("API_KEY=REDACTED"))
            #expect(log.contains("page=2"))
            #expect(log.contains("Authorization: <redacted>"))
            #expect(log.contains("Set-Cookie: <redacted>"))
            #expect(log.contains("X-Visible: shown"))
            #expect(log.contains("← 200 GET"))
            #expect(log.contains("status=200"))
            #expect(log.contains("duration_ms="))
            #expect(log.contains("response_bytes=11"))
        }
    }

    /// The signatures and session tokens of presigned S3 and Google Cloud Storage URLs (where
    /// APIs often redirect downloads) grant access until they expire: redacted like `signature`.
    @Test func presignedURLSignaturesNeverAppearInTheLog() async throws {
        try await withServer { (server) async throws in
            let lines = LockedBox<[String]>([])
            let logger = Logger(label: "test") { _ in CapturingLogHandler(lines: lines) }
            let client = makeClient(server, middleware: [LoggingMiddleware(logger: logger)])
            let response = try await client.get("echo", query: [
                URLQueryItem(name: "X-Amz-Algorithm", value: "AWS4-HMAC-SHA256"),
                URLQueryItem(name: "X-Amz-Security-Token", value: "SESSION-SECRET"),
                URLQueryItem(name: "X-Amz-Signature", value: "AMZ-SIGNATURE-SECRET"),
                URLQueryItem(name: "X-Goog-Signature", value: "GOOG-SIGNATURE-SECRET"),
            ])
            #expect(response.status == .ok)
            let log = lines.value.joined(separator: "\n")
            for secret in ["SESSION-SECRET", "AMZ-SIGNATURE-SECRET", "GOOG-SIGNATURE-SECRET"] {
                #expect(!log.contains(secret), "\(secret) leaked into the log:\n\(log)")
            }
            #expect(log.contains("X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Security-Token=REDACTED&X-Amz-Signature=REDACTED&X-Goog-Signature=REDACTED"), "\(log)")
        }
        let presigned = URL(string: "https://bucket.s3.amazonaws.com/f?X-Amz-Signature=SIG-SECRET&X-Amz-Security-Token=TOKEN-SECRET")!
        #expect(!HTTPClientError.notCached(presigned).description.contains("SECRET"))
    }

    @Test func aFailedCallIsLoggedAtTheFailureLevel() async throws {
        let lines = LockedBox<[String]>([])
        let logger = Logger(label: "test") { _ in CapturingLogHandler(lines: lines) }
        let client = HTTPClient(baseURL: URL(string: "http://127.0.0.1:9")!, middleware: [LoggingMiddleware(logger: logger, level: .debug)])
        await #expect(throws: HTTPClientError.self) { try await client.get("x", query: [URLQueryItem(name: "password", value: "PW")]) }
        #expect(lines.value.count == 2)
        #expect(lines.value.first?.hasPrefix("debug → GET") == true)
        #expect(lines.value.last?.hasPrefix("warning ✕ GET") == true)
        #expect(!lines.value.joined().contains("PW"))
    }
}

/// What looks secret is redacted in every log line the library writes, by one redactor.
@Suite struct SecretRedactionTests {
    @Test func theWordRuleHidesSecretLookingNamesAndKeepsBenignOnes() {
        let redactor = SecretRedactor.standard
        for name in ["X-Api-Key", "x-api-key", "apikey", "apiKey", "API_KEY", "keys", "X-Auth-Token", "private_token",
                     "access_token", "accessToken", "csrftoken", "client_secret", "Authorization", "Proxy-Authorization",
                     "X-Authorization", "oauth_token", "auth", "session", "JSESSIONID", "PHPSESSID", "ASP.NET_SessionId",
                     "password", "db_passwords", "passwd", "pwd", "X-Amz-Signature", "X-Amz-Security-Token",
                     "X-Amz-Credential", "sig", "code", "Cookie", "Set-Cookie", "monkey"] {
            #expect(redactor.isSecret(name), "\(name) is shown")
        }
        // A word that only starts with a secret word is not one.
        for name in ["Accept-Language", "page", "keyboard", "keyword", "author", "tokenizer", "Content-Type",
                     "X-Request-Id", "WWW-Authenticate", "zipcode", "country_code", "secretary"] {
            #expect(!redactor.isSecret(name), "\(name) is hidden")
        }
    }

    @Test func namesCanBeAddedAndRemoved() {
        let redactor = SecretRedactor.standard.redacting(["page", "X-Tenant"]).keeping(["monkey", "code"])
        #expect(redactor.isSecret("PAGE"))
        #expect(redactor.isSecret("x-tenant"))
        #expect(!redactor.isSecret("Monkey"))
        #expect(!redactor.isSecret("code"))
        #expect(redactor.isSecret("X-Api-Key"))
        #expect(!SecretRedactor(words: ["token"], names: []).isSecret("X-Api-Key"))
    }

    @Test func urlsLoseTheirUserinfoAndSecretQueryAndFragmentValues() {
        let redactor = SecretRedactor.standard
        #expect(redactor.redact(URL(string: "https://TOKEN@example.org/x")!) == "https://REDACTED@example.org/x")
        #expect(redactor.redact(URL(string: "https://ann:PW@example.org/x")!) == "https://REDACTED:REDACTED@example.org/x")
        #expect(redactor.redact(URL(string: "https://example.org/x?private_token=T&page=2&keyword=a+b")!)
                == "https://example.org/x?private_token=REDACTED&page=2&keyword=a+b")
        #expect(redactor.redact(URL(string: "https://example.org/cb#access_token=T&state=s")!)
                == "https://example.org/cb#access_token=REDACTED&state=s")
        #expect(redactor.redact(URL(string: "https://example.org/doc#section-2")!) == "https://example.org/doc#section-2")
        #expect(redactor.redact(URL(string: "https://example.org/plain")!) == "https://example.org/plain")
    }

    /// The cases, through the middleware to the fixture server, with the log captured.
    @Test func theMiddlewareRedactsApiKeysAuthTokensQueryTokensAndUserinfo() async throws {
        try await withServer { (server) async throws in
            let lines = LockedBox<[String]>([])
            let logger = Logger(label: "test") { _ in CapturingLogHandler(lines: lines) }
            let middleware = LoggingMiddleware(logger: logger)
            let queue = RequestQueue()
            var request = Request(url: URL(string: "http://USER-TOKEN@127.0.0.1:\(server.port)/echo?private_token=QUERY-TOKEN&page=2&keyword=shoes#access_token=FRAGMENT-TOKEN")!)
            request.headerFields[HTTPField.Name("X-Api-Key")!] = "API-KEY-SECRET"
            request.headerFields[HTTPField.Name("X-Auth-Token")!] = "AUTH-TOKEN-SECRET"
            request.headerFields[.acceptLanguage] = "fr-CH"
            request.headerFields[HTTPField.Name("X-Keyboard")!] = "qwertz"
            let response = try await middleware.intercept(request) { try await queue.response(for: $0) }
            #expect(response.status == .ok)
            let log = lines.value.joined(separator: "\n")
            for secret in ["USER-TOKEN", "QUERY-TOKEN", "FRAGMENT-TOKEN", "API-KEY-SECRET", "AUTH-TOKEN-SECRET"] {
                #expect(!log.contains(secret), "\(secret) leaked into the log:\n\(log)")
            }
            #expect(log.contains("→ GET http://REDACTED@127.0.0.1:\(server.port)/echo?private_token=REDACTED&page=2&keyword=shoes#access_token=REDACTED"), "\(log)")
            #expect(log.contains("X-Api-Key: <redacted>"))
            #expect(log.contains("X-Auth-Token: <redacted>"))
            #expect(log.contains("Accept-Language: fr-CH"))
            #expect(log.contains("X-Keyboard: qwertz"))
        }
    }

    @Test func theMiddlewaresRedactorCanKeepAndAddNames() async throws {
        try await withServer { (server) async throws in
            let lines = LockedBox<[String]>([])
            let logger = Logger(label: "test") { _ in CapturingLogHandler(lines: lines) }
            let middleware = LoggingMiddleware(logger: logger, redactor: .standard.keeping(["X-Api-Key"]).redacting(["page"]))
            let queue = RequestQueue()
            var request = Request(url: server.url("/echo?page=PAGE-VALUE&token=T"))
            request.headerFields[HTTPField.Name("X-Api-Key")!] = "public-demo-key"
            request.headerFields[.authorization] = "Bearer ALWAYS-HIDDEN"
            _ = try await middleware.intercept(request) { try await queue.response(for: $0) }
            let log = lines.value.joined(separator: "\n")
            #expect(log.contains("X-Api-Key: public-demo-key"))
            #expect(log.contains("page=REDACTED&token=REDACTED"), "\(log)")
            #expect(!log.contains("ALWAYS-HIDDEN"))
        }
    }

    /// The library's own warning for a request with TLS verification off showed the whole URL.
    @Test func theInsecureTLSWarningShowsNoSecret() throws {
        let sink = LibraryLogCapture.shared
        let marker = UUID().uuidString
        var request = Request(url: URL(string: "https://USER-TOKEN@127.0.0.1:1/\(marker)?private_token=QUERY-TOKEN&page=2")!)
        request.tls.insecureSkipsVerificationForLocalTestingOnly = true
        _ = RequestOperation(request: request)
        let lines = sink.lines.value.filter { $0.contains(marker) }
        #expect(lines.count == 1, "\(sink.lines.value)")
        let line = try #require(lines.first)
        #expect(line.contains("TLS verification is off"))
        #expect(line.contains("url=https://REDACTED@127.0.0.1:1/\(marker)?private_token=REDACTED&page=2"), "\(line)")
        #expect(!line.contains("USER-TOKEN") && !line.contains("QUERY-TOKEN"))
    }

    @Test func errorDescriptionsUseTheSameRedaction() {
        let url = URL(string: "https://USER-TOKEN@example.org/f?X-Api-Key=KEY-SECRET&page=2")!
        let description = HTTPClientError.notCached(url).description
        #expect(description.contains(SecretRedactor.standard.redact(url)))
        #expect(!description.contains("USER-TOKEN") && !description.contains("KEY-SECRET"))
    }
}

/// Captures the library's own log (label `CurlQueue`) in memory: the process's logging system
/// is bootstrapped once, the first time, sending other labels to standard error as before.
final class LibraryLogCapture: Sendable {
    static let shared = LibraryLogCapture()
    let lines = LockedBox<[String]>([])

    private init() {
        let lines = lines
        LoggingSystem.bootstrap { label in
            guard label == "CurlQueue" else { return StreamLogHandler.standardError(label: label) }
            return CapturingLogHandler(lines: lines)
        }
    }
}
