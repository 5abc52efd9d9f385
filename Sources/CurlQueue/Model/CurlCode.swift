/// A libcurl result code (`CURLcode`), with the names used in libcurl's documentation.
public struct CurlCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The numeric `CURLcode`.
    public var rawValue: Int32

    /// Wraps a numeric `CURLcode`.
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// `CURLE_UNSUPPORTED_PROTOCOL` (1).
    public static let unsupportedProtocol = CurlCode(rawValue: 1)
    /// `CURLE_FAILED_INIT` (2): libcurl could not set up the transfer (the engine reports it
    /// too when it could not add a transfer to its multi handle).
    public static let failedInit = CurlCode(rawValue: 2)
    /// `CURLE_URL_MALFORMAT` (3).
    public static let urlMalformat = CurlCode(rawValue: 3)
    /// `CURLE_COULDNT_RESOLVE_PROXY` (5).
    public static let couldNotResolveProxy = CurlCode(rawValue: 5)
    /// `CURLE_COULDNT_RESOLVE_HOST` (6).
    public static let couldNotResolveHost = CurlCode(rawValue: 6)
    /// `CURLE_COULDNT_CONNECT` (7).
    public static let couldNotConnect = CurlCode(rawValue: 7)
    /// `CURLE_WEIRD_SERVER_REPLY` (8).
    public static let weirdServerReply = CurlCode(rawValue: 8)
    /// `CURLE_HTTP2` (16).
    public static let http2 = CurlCode(rawValue: 16)
    /// `CURLE_PARTIAL_FILE` (18).
    public static let partialFile = CurlCode(rawValue: 18)
    /// `CURLE_WRITE_ERROR` (23).
    public static let writeError = CurlCode(rawValue: 23)
    /// `CURLE_READ_ERROR` (26).
    public static let readError = CurlCode(rawValue: 26)
    /// `CURLE_OPERATION_TIMEDOUT` (28).
    public static let operationTimedOut = CurlCode(rawValue: 28)
    /// `CURLE_RANGE_ERROR` (33).
    public static let rangeError = CurlCode(rawValue: 33)
    /// `CURLE_SSL_CONNECT_ERROR` (35).
    public static let sslConnectError = CurlCode(rawValue: 35)
    /// `CURLE_ABORTED_BY_CALLBACK` (42).
    public static let abortedByCallback = CurlCode(rawValue: 42)
    /// `CURLE_TOO_MANY_REDIRECTS` (47).
    public static let tooManyRedirects = CurlCode(rawValue: 47)
    /// `CURLE_GOT_NOTHING` (52).
    public static let gotNothing = CurlCode(rawValue: 52)
    /// `CURLE_SEND_ERROR` (55).
    public static let sendError = CurlCode(rawValue: 55)
    /// `CURLE_RECV_ERROR` (56).
    public static let recvError = CurlCode(rawValue: 56)
    /// `CURLE_PEER_FAILED_VERIFICATION` (60).
    public static let peerFailedVerification = CurlCode(rawValue: 60)
    /// `CURLE_BAD_CONTENT_ENCODING` (61).
    public static let badContentEncoding = CurlCode(rawValue: 61)
    /// `CURLE_FILESIZE_EXCEEDED` (63).
    public static let fileSizeExceeded = CurlCode(rawValue: 63)
    /// `CURLE_SSL_PINNEDPUBKEYNOTMATCH` (90).
    public static let sslPinnedPublicKeyNotMatch = CurlCode(rawValue: 90)
    /// `CURLE_HTTP2_STREAM` (92).
    public static let http2Stream = CurlCode(rawValue: 92)

    /// The codes that mean poor or no connectivity, retried by default when
    /// ``RequestOperation/autoRetry`` is on: 5, 6, 7, 16, 18, 28, 52, 55, 56 and 92.
    public static let connectivityErrors: Set<CurlCode> = [
        .couldNotResolveProxy, .couldNotResolveHost, .couldNotConnect, .http2, .partialFile,
        .operationTimedOut, .gotNothing, .sendError, .recvError, .http2Stream,
    ]

    /// The `CURLE_…` name, or `CURLE_<number>` for a code this type has no name for.
    public var name: String {
        Self.names[rawValue].map { "CURLE_\($0)" } ?? "CURLE_\(rawValue)"
    }

    /// `CURLE_NAME (code)`.
    public var description: String { "\(name) (\(rawValue))" }

    private static let names: [Int32: String] = [
        0: "OK", 1: "UNSUPPORTED_PROTOCOL", 2: "FAILED_INIT", 3: "URL_MALFORMAT",
        4: "NOT_BUILT_IN", 5: "COULDNT_RESOLVE_PROXY", 6: "COULDNT_RESOLVE_HOST",
        7: "COULDNT_CONNECT", 8: "WEIRD_SERVER_REPLY", 16: "HTTP2", 18: "PARTIAL_FILE",
        22: "HTTP_RETURNED_ERROR", 23: "WRITE_ERROR", 25: "UPLOAD_FAILED", 26: "READ_ERROR",
        27: "OUT_OF_MEMORY", 28: "OPERATION_TIMEDOUT", 33: "RANGE_ERROR", 35: "SSL_CONNECT_ERROR",
        42: "ABORTED_BY_CALLBACK", 43: "BAD_FUNCTION_ARGUMENT", 47: "TOO_MANY_REDIRECTS",
        52: "GOT_NOTHING", 53: "SSL_ENGINE_NOTFOUND", 55: "SEND_ERROR", 56: "RECV_ERROR",
        58: "SSL_CERTPROBLEM", 59: "SSL_CIPHER", 60: "PEER_FAILED_VERIFICATION",
        61: "BAD_CONTENT_ENCODING", 63: "FILESIZE_EXCEEDED", 77: "SSL_CACERT_BADFILE",
        80: "SSL_SHUTDOWN_FAILED", 90: "SSL_PINNEDPUBKEYNOTMATCH", 92: "HTTP2_STREAM",
        95: "HTTP3",
    ]
}
