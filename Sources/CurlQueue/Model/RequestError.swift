/// Why an operation ended without a ``Response``.
public enum RequestError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The operation was cancelled before it finished.
    case cancelled
    /// A time limit of ``Request/Timeouts`` ran out (`CURLE_OPERATION_TIMEDOUT`).
    case timedOut(TransportFailure)
    /// The transfer failed: no connection, a broken connection, a TLS failure, too many
    /// redirects, a disk write error and so on.
    case transport(TransportFailure)
    /// The request could not be sent as given: malformed URL, a scheme not allowed, a header
    /// holding CR, LF or NUL, a body file that is missing. Never retried.
    case invalidRequest(String)
    /// The destination file could not be created, written or moved into place.
    case fileSystem(String)

    /// The libcurl failure behind a ``timedOut(_:)`` or ``transport(_:)`` error.
    public var transportFailure: TransportFailure? {
        switch self {
        case .timedOut(let failure), .transport(let failure): return failure
        default: return nil
        }
    }

    /// A one-line account of the error, for logs and users.
    public var description: String {
        switch self {
        case .cancelled: return "cancelled"
        case .timedOut(let failure): return "timed out: \(failure)"
        case .transport(let failure): return "\(failure)"
        case .invalidRequest(let reason): return "invalid request: \(reason)"
        case .fileSystem(let reason): return "file system: \(reason)"
        }
    }
}

/// A failure reported by libcurl.
public struct TransportFailure: Hashable, Sendable, CustomStringConvertible {
    /// The `CURLcode`.
    public var code: CurlCode
    /// libcurl's message from its error buffer, or its generic text for the code.
    public var message: String

    /// Creates a failure.
    public init(code: CurlCode, message: String) {
        self.code = code
        self.message = message
    }

    /// `CURLE_NAME (code): message`.
    public var description: String { "\(code.name) (\(code.rawValue)): \(message)" }
}
