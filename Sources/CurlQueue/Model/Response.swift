public import Foundation
public import HTTPTypes
import Synchronization

/// A completed HTTP exchange. Any status, 404 and 500 included, is a `Response`; only a
/// transfer that got no complete answer is a ``RequestError``.
public struct Response: Sendable {
    /// The status of the final response (after redirects).
    public var status: HTTPResponse.Status {
        get { values.value.status }
        set { values.modify { $0.status = newValue } }
    }
    /// The header fields of the final response, in the order received.
    ///
    /// A response from the engine parses its fields on the first read of this property (from
    /// any thread; the result is kept), so a caller that never looks at them pays nothing.
    public var headerFields: HTTPFields {
        get { values.value.fieldLines.fields }
        set { values.modify { $0.fieldLines = FieldLines(parsed: newValue) } }
    }
    /// The body. Empty when a successful body went to the request's destination file.
    public var body: Data {
        get { values.value.body }
        set { values.modify { $0.body = newValue } }
    }
    /// The destination file holding the body, for a successful download to a file.
    public var fileURL: URL? {
        get { values.value.fileURL }
        set { values.modify { $0.fileURL = newValue } }
    }
    /// The digests of ``fileURL``'s bytes, lowercase hex, for each of the request's
    /// ``Request/fileDigests``, computed as they were written. Empty when none were asked for
    /// or the file was resumed (see ``Request/fileDigests``).
    public var fileDigests: [DigestAlgorithm: String] {
        get { values.value.fileDigests }
        set { values.modify { $0.fileDigests = newValue } }
    }
    /// The URL of the final response, after redirects.
    ///
    /// When no redirect happened, this is the request's own URL; one the request kept as a
    /// string is parsed on the first read of this property (the result is kept).
    public var effectiveURL: URL? {
        get { values.value.effectiveTarget?.url }
        set { values.modify { $0.effectiveTarget = newValue.map(LazyURL.parsed) } }
    }
    /// The effective URL as the engine got it (the request's own string, when kept).
    var effectiveTarget: LazyURL? { values.value.effectiveTarget }
    /// The HTTP version the final response used.
    public var httpVersion: HTTPVersion {
        get { values.value.httpVersion }
        set { values.modify { $0.httpVersion = newValue } }
    }
    /// Timings and sizes of the attempt that produced this response.
    public var metrics: TransferMetrics {
        get { values.value.metrics }
        set { values.modify { $0.metrics = newValue } }
    }
    /// How many attempts were made, the first included.
    public var attempts: Int {
        get { values.value.attempts }
        set { values.modify { $0.attempts = newValue } }
    }

    /// The stored values of a response, behind one reference (``CopyOnWrite``): a response is
    /// copied about seven times between libcurl and its handler (the attempt's outcome, the
    /// operation's result, the hand-over to the callback queue), and each copy retained and
    /// released its status text, body, fields and URLs.
    private struct Values: Sendable {
        var status: HTTPResponse.Status
        var fieldLines: FieldLines
        var body: Data
        var fileURL: URL?
        var fileDigests: [DigestAlgorithm: String] = [:]
        var effectiveTarget: LazyURL?
        var httpVersion: HTTPVersion
        var metrics: TransferMetrics
        var attempts: Int
    }

    private var values: CopyOnWrite<Values>

    /// A response made by hand: for a middleware or cache that answers without a transfer, or
    /// a test. `effectiveURL` is the URL the response came from (after redirects); `attempts`
    /// how many transfers it took (at least 1 for a response that came over the network).
    public init(
        status: HTTPResponse.Status, headerFields: HTTPFields, body: Data, fileURL: URL?, effectiveURL: URL?,
        httpVersion: HTTPVersion, metrics: TransferMetrics, attempts: Int
    ) {
        values = CopyOnWrite(Values(
            status: status, fieldLines: FieldLines(parsed: headerFields), body: body, fileURL: fileURL,
            effectiveTarget: effectiveURL.map(LazyURL.parsed), httpVersion: httpVersion, metrics: metrics,
            attempts: attempts))
    }

    /// A response whose fields are parsed from `fieldLines` (as ``ResponseHeadParser`` keeps
    /// them) when first read.
    init(
        status: HTTPResponse.Status, fieldLines: [UInt8], body: Data, fileURL: URL?, effectiveTarget: LazyURL?,
        httpVersion: HTTPVersion, metrics: TransferMetrics, attempts: Int
    ) {
        values = CopyOnWrite(Values(
            status: status, fieldLines: FieldLines(fieldLines), body: body, fileURL: fileURL,
            effectiveTarget: effectiveTarget, httpVersion: httpVersion, metrics: metrics, attempts: attempts))
    }
}

/// A response head's field lines, parsed into `HTTPFields` on the first read and kept; or
/// fields given already parsed.
///
/// Shared by the copies of a ``Response`` and read from any thread: the parsed fields are
/// published once through an `AtomicLazyReference`. Two threads reading first at the same
/// moment may both parse; one result is kept, and both are equal.
///
/// One class for both forms rather than an enum of two payloads: Swift keeps such an enum's
/// case in the spare high bits of the pointer, where LeakSanitizer cannot see it, and a
/// response still alive at exit was reported as leaked.
final class FieldLines: Sendable {
    private let lines: [UInt8]
    private let parsed = AtomicLazyReference<SharedValue<HTTPFields>>()

    init(_ lines: [UInt8]) {
        self.lines = lines
    }

    init(parsed fields: HTTPFields) {
        lines = []
        _ = parsed.storeIfNil(SharedValue(fields))
    }

    var fields: HTTPFields {
        if let box = parsed.load() { return box.value }
        return parsed.storeIfNil(SharedValue(ResponseHeadParser.parseFields(lines))).value
    }
}

/// An HTTP protocol version.
public struct HTTPVersion: Hashable, Sendable, CustomStringConvertible {
    /// Major version.
    public var major: Int
    /// Minor version.
    public var minor: Int

    /// Creates a version.
    public init(major: Int, minor: Int) {
        self.major = major
        self.minor = minor
    }

    /// HTTP/1.0.
    public static let http1_0 = HTTPVersion(major: 1, minor: 0)
    /// HTTP/1.1.
    public static let http1_1 = HTTPVersion(major: 1, minor: 1)
    /// HTTP/2.
    public static let http2 = HTTPVersion(major: 2, minor: 0)
    /// HTTP/3.
    public static let http3 = HTTPVersion(major: 3, minor: 0)

    /// `HTTP/1.1`, `HTTP/2` and so on.
    public var description: String { minor == 0 && major >= 2 ? "HTTP/\(major)" : "HTTP/\(major).\(minor)" }
}

/// Timings and sizes of one transfer, as libcurl measured them. Times count from the start of
/// the attempt and include everything before them (connect includes name lookup, and so on).
public struct TransferMetrics: Hashable, Sendable {
    /// Until the name was resolved.
    public var nameLookup: Duration
    /// Until the TCP connection was made.
    public var connect: Duration
    /// Until the TLS handshake was done (zero for plain HTTP).
    public var tlsHandshake: Duration
    /// Until the first response byte arrived.
    public var timeToFirstByte: Duration
    /// The whole attempt.
    public var total: Duration
    /// Body bytes sent.
    public var bytesSent: Int64
    /// Body bytes received (after decoding).
    public var bytesReceived: Int64
    /// Redirects followed.
    public var redirectCount: Int
    /// New connections this attempt opened (0 when it reused one).
    public var connectionsOpened: Int

    /// Creates metrics.
    public init(
        nameLookup: Duration = .zero, connect: Duration = .zero, tlsHandshake: Duration = .zero,
        timeToFirstByte: Duration = .zero, total: Duration = .zero, bytesSent: Int64 = 0,
        bytesReceived: Int64 = 0, redirectCount: Int = 0, connectionsOpened: Int = 0
    ) {
        self.nameLookup = nameLookup
        self.connect = connect
        self.tlsHandshake = tlsHandshake
        self.timeToFirstByte = timeToFirstByte
        self.total = total
        self.bytesSent = bytesSent
        self.bytesReceived = bytesReceived
        self.redirectCount = redirectCount
        self.connectionsOpened = connectionsOpened
    }
}

extension Response: CustomStringConvertible {
    /// A line for logs and test failures: the status, the body's size or file, the attempts and
    /// the effective URL. No header field or body byte appears in it (they may hold secrets).
    public var description: String {
        let target = fileURL.map { "file \($0.path)" } ?? "\(body.count) bytes"
        return "Response(HTTP \(status.code), \(target), \(attempts) attempt\(attempts == 1 ? "" : "s"), \(metrics.redirectCount) redirects, from \(effectiveTarget?.absoluteString ?? "?"))"
    }
}
