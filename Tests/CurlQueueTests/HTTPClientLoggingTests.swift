import CurlQueue
import CurlQueueTestSupport
import Foundation
import HTTPTypes
import Logging
import Testing

/// A LogHandler that keeps every entry, message and metadata, as text.
struct CapturingLogHandler: LogHandler {
    let lines: Box<[String]>
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
            let lines = Box<[String]>([])
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
            let lines = Box<[String]>([])
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
        let lines = Box<[String]>([])
        let logger = Logger(label: "test") { _ in CapturingLogHandler(lines: lines) }
        let client = HTTPClient(baseURL: URL(string: "http://127.0.0.1:9")!, middleware: [LoggingMiddleware(logger: logger, level: .debug)])
        await #expect(throws: HTTPClientError.self) { try await client.get("x", query: [URLQueryItem(name: "password", value: "PW")]) }
        #expect(lines.value.count == 2)
        #expect(lines.value.first?.hasPrefix("debug → GET") == true)
        #expect(lines.value.last?.hasPrefix("warning ✕ GET") == true)
        #expect(!lines.value.joined().contains("PW"))
    }
}
