public import CurlQueue
import Foundation

/// Errors in words a person can act on, for the retry lines, the failures in the summary, the
/// JSON report and the durable store: never libcurl's `CURLE_*` names, Foundation's domains or
/// Swift type names. `curlq get`, `curlq daemon` and ``DownloadFailureKind`` use these words.
public enum ErrorWords {
    /// Why an attempt is retried: `HTTP 503 Service Unavailable`, `connection refused…`.
    public static func describe(_ cause: RetriedAttempt.Cause, host: String?) -> String {
        switch cause {
        case .status(let code): return status(code)
        case .error(let error): return describe(error, host: host)
        }
    }

    /// Why a file failed: ``describe(_:host:)``, and for a host that does not resolve and was
    /// not retried, what to do about it.
    public static func failure(_ error: RequestError, host: String?, dnsRetried: Bool) -> String {
        let words = describe(error, host: host)
        guard error.transportFailure?.code == .couldNotResolveHost, !dnsRetried else { return words }
        return words + "; check its spelling (--retry-dns retries it, for a resolver that comes and goes)"
    }

    /// A request's failure in words; `host` names the host in a DNS failure.
    public static func describe(_ error: RequestError, host: String?) -> String {
        switch error {
        case .cancelled: return "cancelled"
        case .timedOut(let failure), .transport(let failure): return describe(failure, host: host)
        case .invalidRequest(let reason): return "the request cannot be sent: \(reason)"
        case .fileSystem(let reason): return reason
        }
    }

    /// A certificate that failed verification, by libcurl's (OpenSSL's) message: a name that
    /// does not match the host is not fixed by trusting another CA, an expired one by neither.
    static func certificateWords(_ message: String) -> String {
        let lowered = message.lowercased()
        if lowered.contains("subject name") || lowered.contains("host name") || lowered.contains("hostname mismatch") {
            return "the server's certificate is not for this host name: \(message) (use the name the certificate was issued for)"
        }
        if lowered.contains("expired") || lowered.contains("not yet valid") {
            return "the server's certificate is out of its validity dates: \(message) (check the clock, or the server's renewal)"
        }
        return "the server's certificate is not trusted: \(message) (--cacert adds a CA)"
    }

    /// A transport failure in words; `host` names the host in a DNS failure.
    public static func describe(_ failure: TransportFailure, host: String?) -> String {
        let message = failure.message
        switch failure.code {
        case .couldNotResolveHost:
            return "the host name \(host.map(quotedHost) ?? "") does not resolve (DNS)"
        case .couldNotResolveProxy: return "the proxy's host name does not resolve (DNS); check the proxy variables"
        case .couldNotConnect: return "could not connect (connection refused, or the host is unreachable)"
        case .operationTimedOut:
            if message.hasPrefix("no byte moved") { return "stalled: \(message) (--stall-timeout)" }
            if message.hasPrefix("Operation too slow") {
                // libcurl's "Operation too slow. Less than N bytes/sec transferred the last S seconds".
                let detail = message.replacingOccurrences(of: "Operation too slow. ", with: "")
                return "too slow: \(detail.prefix(1).lowercased() + detail.dropFirst()) (--speed-limit, --speed-time)"
            }
            if message.localizedCaseInsensitiveContains("connect") { return "timed out connecting (--connect-timeout)" }
            return "timed out"
        case .gotNothing: return "the server closed the connection without answering"
        case .partialFile: return "the connection closed before the whole body came"
        case .recvError: return "the connection broke while receiving (reset by the server or the network)"
        case .sendError: return "the connection broke while sending"
        case .weirdServerReply: return "the server's answer is not valid HTTP"
        case .http2, .http2Stream: return "HTTP/2 error: \(message)"
        case .writeError: return "cannot write the file (disk full, or the folder is read-only)"
        case .readError: return "cannot read the request body"
        case .rangeError: return "the server refused the byte range asked for (resume)"
        case .sslConnectError: return "TLS handshake failed: \(message)"
        case .peerFailedVerification: return certificateWords(message)
        case .sslPinnedPublicKeyNotMatch: return "the server's public key does not match --pinnedpubkey"
        case .tooManyRedirects: return "too many redirects"
        case .badContentEncoding: return "the body's Content-Encoding cannot be decoded"
        case .fileSizeExceeded: return "the body is larger than allowed"
        case .unsupportedProtocol: return "unsupported protocol (http and https only)"
        case .urlMalformat: return "malformed URL"
        case .abortedByCallback: return "aborted"
        default:
            // libcurl's own message (its error buffer, else curl_easy_strerror): words, not a name.
            return message.isEmpty ? "network error \(failure.code.rawValue)" : message
        }
    }
}

/// A host name in single quotes, control characters shown as `?` (a URL's host is the server's
/// name, but it is still text from the input).
private func quotedHost(_ host: String) -> String {
    "'" + String(String.UnicodeScalarView(host.unicodeScalars.prefix(200).map { $0.value < 0x20 || $0.value == 0x7F ? "?" : $0 })) + "'"
}
