public import CurlQueue

/// What kind of failure ended a download: what a script needs to tell a 404 from a network
/// outage (`curlq get --json`'s `errorKind`, `curlq status --json`'s, the durable store's).
public enum DownloadFailureKind: String, Codable, Sendable, Hashable, CaseIterable {
    /// The server answered with an error status.
    case http
    /// The host name does not resolve.
    case dns
    /// No connection could be made (refused, unreachable, or the connect timeout).
    case connect
    /// The connection broke, or the server closed it without an answer.
    case network
    /// No byte moved for the stall timeout.
    case stall
    /// The whole-file time limit, or another time limit.
    case timeout
    /// TLS: handshake, certificate, pinned key.
    case tls
    /// The file's checksum does not match.
    case checksum
    /// A file already stands under the name and is not this download's (it is never replaced).
    case existingFile = "existing-file"
    /// A local file or folder problem (cannot write, a symbolic link or folder in the way).
    case file
    /// Stopped before it completed (a signal, a stop, a cancel).
    case interrupted
    /// Anything else (the reason's words say what).
    case other

    /// The kind of a transfer's failure.
    public init(_ error: RequestError) {
        switch error {
        case .cancelled: self = .interrupted
        case .invalidRequest: self = .other
        case .fileSystem: self = .file
        case .timedOut(let failure), .transport(let failure):
            switch failure.code {
            case .couldNotResolveHost, .couldNotResolveProxy: self = .dns
            case .couldNotConnect: self = .connect
            case .operationTimedOut:
                if failure.message.hasPrefix("no byte moved") { self = .stall; return }
                self = failure.message.localizedCaseInsensitiveContains("connect") ? .connect : .timeout
            case .gotNothing, .partialFile, .recvError, .sendError, .weirdServerReply, .http2, .http2Stream: self = .network
            case .sslConnectError, .peerFailedVerification, .sslPinnedPublicKeyNotMatch: self = .tls
            case .writeError: self = .file
            default: self = .other
            }
        }
    }

    /// Whether another attempt could end otherwise: false for a refused certificate or pinned
    /// key, a local file problem, an existing file and a request that cannot be sent, which no
    /// retry fixes (and whose retries would only hammer the server).
    public var isWorthRetrying: Bool {
        switch self {
        case .tls, .file, .existingFile, .other, .interrupted: return false
        case .http, .dns, .connect, .network, .stall, .timeout, .checksum: return true
        }
    }
}
