public import Foundation
public import HTTPTypes

/// Everything needed to perform one HTTP transfer.
///
/// `Request` is a value: two requests built from identical parameters are equal and hash
/// alike. ``RequestQueue`` relies on this to detect duplicates and to find the operations
/// that ``RequestQueue/cancel(_:)`` should cancel.
///
/// Building a request never fails. Problems such as a malformed URL, a header holding CR, LF
/// or NUL, or a body file that does not exist are reported when the request runs, as
/// ``RequestError/invalidRequest(_:)`` through the operation's completion handler.
public struct Request: Hashable, Sendable {
    /// The body of a request.
    public enum Body: Hashable, Sendable {
        /// Bytes held in memory.
        case bytes(Data)
        /// A file, streamed from disk as it is sent and opened again for each attempt.
        case file(URL)
        /// Parts sent one after the other as one body, in order: bytes from memory and files
        /// streamed from disk (a multipart body built by the caller, say). Memory use does not
        /// grow with the files' sizes.
        ///
        /// Every file is opened and measured when the attempt starts, so the total size is
        /// known and sent as `Content-Length`; a file missing or not readable then fails the
        /// operation with ``RequestError/invalidRequest(_:)`` before anything is sent. A file
        /// sends exactly the size it had then: one that shrinks while it is being sent fails the
        /// attempt with ``RequestError/fileSystem(_:)``; what it grows by is not sent. The body
        /// is sent again whole after a 307/308 redirect and for each retry (files opened again).
        case segments([Segment])
        /// Chunks produced while the body is sent (an async sequence), with or without a known
        /// length: sent chunked when it is not known. Sent once: see ``RequestBodyStream`` for who
        /// iterates it, the backpressure, and what retries, redirects and cancels do with it.
        case stream(RequestBodyStream)

        /// One part of a ``Request/Body/segments(_:)`` body.
        public enum Segment: Hashable, Sendable {
            /// Bytes held in memory.
            case bytes(Data)
            /// A regular file, streamed from disk as it is sent.
            case file(URL)
        }
    }

    /// The URL to fetch.
    ///
    /// A request made with ``init(string:method:)`` from a plain URL string keeps the string,
    /// which is what libcurl takes, and parses it into a `URL` on the first read of this
    /// property only (the result is kept).
    public var url: URL {
        get { values.value.target.url }
        set { values.modify { $0.target = .parsed(newValue) } }
    }
    /// The URL as the engine uses it: the string for libcurl and the scheme, with no parsing.
    var target: LazyURL { values.value.target }
    /// The method; any token is allowed, not only the common ones.
    public var method: HTTPRequest.Method {
        get { values.value.method }
        set { values.modify { $0.method = newValue } }
    }
    /// Header fields, in order; a name may repeat.
    public var headerFields: HTTPFields {
        get { values.value.headerFields }
        set { values.modify { $0.headerFields = newValue } }
    }
    /// The body sent with the request, or `nil` for none.
    public var body: Body? {
        get { values.value.body }
        set { values.modify { $0.body = newValue } }
    }
    /// Limits on how long the transfer may take.
    public var timeouts: Timeouts {
        get { values.value.timeouts }
        set { values.modify { $0.timeouts = newValue } }
    }
    /// Whether and how far redirects are followed.
    public var redirectPolicy: RedirectPolicy {
        get { values.value.redirectPolicy }
        set { values.modify { $0.redirectPolicy = newValue } }
    }
    /// When set, a successful (2xx) response body streams to `<destination>.part`, which is
    /// renamed atomically to `destination` once complete. Error responses stay in memory.
    public var destination: URL? {
        get { values.value.destination }
        set { values.modify { $0.destination = newValue } }
    }
    /// With a ``destination``: when `<destination>.part` exists, ask for the rest of it with a
    /// `Range` header and append on `206 Partial Content`; a `200 OK` starts over cleanly.
    /// The file is renamed into place only when the 206's `Content-Range` started where the
    /// `.part` ended and ran to the end of the resource. The `.part` keeps the `ETag` (or
    /// `Last-Modified`) of the response it began with, in an extended attribute where the file
    /// system has them, and the resume sends it as `If-Range`: a file that changed on the
    /// server comes whole instead of being spliced onto the old bytes.
    ///
    /// Without it, an existing `.part` is removed when the first attempt starts. Either way,
    /// the retries of an operation resume the `.part` its own attempts wrote.
    ///
    /// A transfer holds a `flock` on the `.part` it writes. A `.part` that another transfer
    /// (of this process or another) is writing is never resumed or appended to: this one asks
    /// for the whole body and writes a file of its own in its place.
    public var resume: Bool {
        get { values.value.resume }
        set { values.modify { $0.resume = newValue } }
    }
    /// With a ``destination``: digests of the file computed as its bytes are written, given
    /// in ``Response/fileDigests`` of the response that completed it. None when the file was
    /// resumed (its first bytes were written by an earlier attempt or run): hash it from disk
    /// then. Empty by default.
    public var fileDigests: Set<DigestAlgorithm> {
        get { values.value.fileDigests }
        set { values.modify { $0.fileDigests = newValue } }
    }
    /// Certificate trust for HTTPS.
    public var tls: TLSOptions {
        get { values.value.tls }
        set { values.modify { $0.tls = newValue } }
    }
    /// The URL schemes this request may use, also after a redirect. Defaults to http and https.
    public var allowedSchemes: Set<String> {
        get { values.value.allowedSchemes }
        set { values.modify { $0.allowedSchemes = newValue } }
    }

    /// `["http", "https"]`, the default of ``allowedSchemes``: one set shared by every request
    /// (a set literal per request would allocate and hash both names each time).
    @usableFromInline static let webSchemes: Set<String> = ["http", "https"]
    /// The most body bytes a response may bring (the whole resource, for a resumed download),
    /// or `nil` for no limit. A larger body fails the attempt with a ``RequestError/transport(_:)``
    /// of code ``CurlCode/fileSizeExceeded`` — at once when `Content-Length` announces it,
    /// otherwise as soon as the limit is passed — and its `.part` file is deleted. Bodies are
    /// counted as they arrive on the wire: CurlQueue does not ask for or decode compressed ones.
    public var maxResponseBodySize: Int64? {
        get { values.value.maxResponseBodySize }
        set { values.modify { $0.maxResponseBodySize = newValue } }
    }
    /// The most body bytes a response kept in memory may bring (one with no ``destination``
    /// to go to, that is not discarded or streamed, or an error response of a download), or
    /// `nil` for no limit. A larger body fails the attempt with a ``RequestError/transport(_:)``
    /// of code ``CurlCode/fileSizeExceeded``, at once when `Content-Length` announces it,
    /// otherwise as soon as the limit is passed, so that a server cannot grow the process
    /// until it is killed. Bodies written to a ``destination`` are not limited by it.
    ///
    /// Defaults to ``defaultMaxInMemoryBodySize`` (64 MiB).
    public var maxInMemoryBodySize: Int64? {
        get { values.value.maxInMemoryBodySize }
        set { values.modify { $0.maxInMemoryBodySize = newValue } }
    }
    /// The default of ``maxInMemoryBodySize``: 64 MiB, larger than any API response one
    /// would parse in memory, and small enough that a few dozen transfers at once cannot
    /// exhaust a small machine. Larger bodies belong in a ``destination`` file or a stream.
    public static let defaultMaxInMemoryBodySize: Int64 = 64 * 1024 * 1024
    /// When true, a body that has no ``destination`` to go to is counted (progress, metrics) but
    /// not kept: ``Response/body`` is empty. For transfers that only need the status, the
    /// fields or the size, at no memory cost however large the body.
    public var discardsBody: Bool {
        get { values.value.discardsBody }
        set { values.modify { $0.discardsBody = newValue } }
    }

    /// The most body bytes per second this transfer receives (curl's `--limit-rate`), or `nil`
    /// (the default) for no limit. Values below 1 mean 1.
    ///
    /// CurlQueue paces the body: bytes that come ahead of the rate are left with libcurl, the
    /// transfer paused (no stall limit runs meanwhile), until their time; the server then waits
    /// on TCP's flow control. Reads are at most an eighth of a second of the rate, so the rate
    /// holds over any second or more, not over each millisecond. The response head is not
    /// counted.
    public var maxReceiveSpeed: Int64? {
        get { values.value.maxReceiveSpeed }
        set { values.modify { $0.maxReceiveSpeed = newValue } }
    }
    /// A receive-speed limit shared with every other request that holds the same
    /// ``SharedRateLimit`` (aria2's `--max-overall-rate`), or `nil` (the default). See
    /// ``SharedRateLimit`` for how it is shared out.
    public var sharedReceiveLimit: SharedRateLimit? {
        get { values.value.sharedReceiveLimit }
        set { values.modify { $0.sharedReceiveLimit = newValue } }
    }

    /// Header fields of this request that a redirect to another origin carries along.
    ///
    /// An origin is a scheme, a host and a port. When a redirect leads to another origin than
    /// the request's, the fields the caller set stop there, for that hop and every later one:
    /// an `X-Api-Key`, `Authorization`, `Cookie`, `Proxy-Authorization` or any token field
    /// meant for one server does not reach the server another one points at. Only the fields
    /// of ``fieldsSentToAnyOrigin`` (`Accept`, `Content-Type`, `User-Agent`, …), which say
    /// nothing about the caller, and the fields named here go along. Empty by default.
    ///
    /// A redirect within the origin keeps every field. Fields CurlQueue sets itself for a
    /// resume (`Range`, `If-Range`) go along as before.
    public var fieldsAllowedAcrossOrigins: Set<HTTPField.Name> {
        get { values.value.fieldsAllowedAcrossOrigins }
        set { values.modify { $0.fieldsAllowedAcrossOrigins = newValue } }
    }

    /// The header fields that a redirect carries to any origin: `Accept`, `Accept-Encoding`,
    /// `Accept-Language`, `Cache-Control`, `Content-Language`, `Content-Type`, `Expect` and
    /// `User-Agent`. See ``fieldsAllowedAcrossOrigins``.
    public static let fieldsSentToAnyOrigin: Set<HTTPField.Name> = [
        .accept, .acceptEncoding, .acceptLanguage, .cacheControl, .contentLanguage, .contentType, .expect, .userAgent,
    ]

    /// With a ``destination``: the finished file keeps the validator its `.part` carried
    /// (``DestinationFile/validatorAttribute``) instead of losing it at the rename. For the
    /// durable worker, which removes it once the job's outcome is recorded: a file found
    /// under its final name with no recorded outcome can be confirmed with the server
    /// (`If-Range`) instead of fetched again.
    package var keepsValidatorOnFile: Bool {
        get { values.value.keepsValidatorOnFile }
        set { values.modify { $0.keepsValidatorOnFile = newValue } }
    }

    /// With a ``destination``: the URL whose bytes the `.part` holds, written on it
    /// (``PartFileAttribute/source``) whenever this request opens it, so that a job with
    /// mirrors knows, even after a kill, which server its `.part` came from.
    package var partFileSource: String? {
        get { values.value.partFileSource }
        set { values.modify { $0.partFileSource = newValue } }
    }

    /// Problems found while building the request, reported when it runs.
    var problems: [String] {
        get { values.value.problems }
        set { values.modify { $0.problems = newValue } }
    }

    /// The stored values of a request, behind one reference (``CopyOnWrite``): copying a
    /// request (into an operation, a transfer, a caller's array) retains one object instead of
    /// each URL, string, set and field list it holds — about nine references, each retained on
    /// a copy and released after it, and a request was copied five times on its way to libcurl.
    struct Values: Hashable, Sendable {
        var target: LazyURL
        var method: HTTPRequest.Method
        var headerFields: HTTPFields
        var body: Body?
        var timeouts: Timeouts
        var redirectPolicy: RedirectPolicy
        var destination: URL?
        var resume: Bool
        var fileDigests: Set<DigestAlgorithm> = []
        var keepsValidatorOnFile = false
        var partFileSource: String? = nil
        var tls: TLSOptions
        var allowedSchemes: Set<String>
        var maxResponseBodySize: Int64? = nil
        var maxInMemoryBodySize: Int64? = Request.defaultMaxInMemoryBodySize
        var discardsBody = false
        var fieldsAllowedAcrossOrigins: Set<HTTPField.Name> = []
        var maxReceiveSpeed: Int64? = nil
        var sharedReceiveLimit: SharedRateLimit? = nil
        var problems: [String] = []
    }

    /// The stored values, copied on write.
    private var values: CopyOnWrite<Values>

    /// Equal when every stored value is equal (the same storage is equal without a look).
    public static func == (lhs: Request, rhs: Request) -> Bool {
        lhs.values.isShared(with: rhs.values) || lhs.values.value == rhs.values.value
    }

    /// Creates a request.
    public init(
        url: URL,
        method: HTTPRequest.Method = .get,
        headerFields: HTTPFields = [:],
        body: Body? = nil,
        timeouts: Timeouts = Timeouts(),
        redirectPolicy: RedirectPolicy = .follow(max: 10),
        destination: URL? = nil,
        resume: Bool = false,
        tls: TLSOptions = TLSOptions(),
        allowedSchemes: Set<String> = Request.webSchemes
    ) {
        values = CopyOnWrite(Values(
            target: .parsed(url), method: method, headerFields: headerFields, body: body, timeouts: timeouts,
            redirectPolicy: redirectPolicy, destination: destination, resume: resume, tls: tls,
            allowedSchemes: allowedSchemes))
    }

    /// Creates a request from a URL string. A string that is not a URL gives a request whose
    /// operation completes with ``RequestError/invalidRequest(_:)``.
    ///
    /// The request is the one `Request(url: URL(string: string)!)` would make, equal to it and
    /// hashed alike; a plain string (`scheme://host/path?query`, with nothing to escape) is
    /// not parsed into a `URL` unless ``url`` is read, as libcurl parses it anyway.
    public init(string: String, method: HTTPRequest.Method = .get) {
        self.init(url: Self.placeholderURL, method: method)
        if let target = LazyURL(string: string) {
            values.modify { $0.target = target }
        } else {
            values.modify { $0.problems.append("malformed URL: \(string.debugDescription)") }
        }
    }

    /// The URL of a request whose string was not a URL (it fails before anything is sent).
    private static let placeholderURL = URL(string: "invalid:")!

    /// Appends a header field given as strings.
    ///
    /// Unlike `HTTPFields`, which quietly turns forbidden bytes into spaces, this keeps the
    /// caller honest: a name that is not an HTTP token, or a value holding CR, LF or NUL, makes
    /// the request fail with ``RequestError/invalidRequest(_:)`` instead of being sent.
    public mutating func addHeader(_ name: String, _ value: String) {
        guard let fieldName = HTTPField.Name(name) else {
            values.modify { $0.problems.append("invalid header name \(name.debugDescription)") }
            return
        }
        if value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }) {
            values.modify { $0.problems.append("header \(name) has a value holding CR, LF or NUL") }
            return
        }
        values.modify { $0.headerFields.append(HTTPField(name: fieldName, value: value)) }
    }
}

extension Request {
    /// Hashes the parts of the request that tell requests apart in practice: the URL, the
    /// method, the destination, the body and the number of header fields.
    ///
    /// `==` compares every stored value; this hashes only values
    /// that equal requests share (equal header fields are as many), so equal requests hash
    /// alike. ``RequestQueue`` hashes every request it is given, for duplicate detection, and
    /// tells requests of one hash value apart with `==`, so the hash is kept cheap
    /// (docs/performance.md, "Design choices").
    ///
    /// Requests that differ only in the values of their header fields or in the options
    /// share a hash value: a queue holding many of them at once compares each one added
    /// with all of them.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(target)
        hasher.combine(method)
        hasher.combine(destination)
        hasher.combine(body)
        hasher.combine(headerFields.count)
    }
}

extension Request {
    /// Limits on the duration of a transfer, each `nil` for none. A limit that passes fails
    /// the attempt with ``RequestError/timedOut(_:)``, code ``CurlCode/operationTimedOut`` (28),
    /// which ``RequestOperation/autoRetry`` retries like any time-out.
    ///
    /// The defaults bound what a stalled or misbehaving server can hold a queue slot for: 30 s
    /// to connect, 60 s without a byte moving, 60 s for a response head, and no total (a large
    /// download may take as long as it needs while bytes keep coming). A body trickling a byte
    /// now and then is bounded by ``total`` alone, and a body kept in memory by
    /// ``Request/maxInMemoryBodySize``.
    public struct Timeouts: Hashable, Sendable {
        /// Time allowed to resolve the name and connect (including TLS).
        public var connect: Duration?
        /// Time allowed for the whole transfer of one attempt.
        public var total: Duration?
        /// The transfer fails when no byte has moved, either way, for this long: no byte of the
        /// response (head or body) arrived and no byte of the request body was taken. The
        /// engine's own timer checks it, so it fails within about 10 ms of the limit wherever
        /// the stall is: waiting for the first byte of the answer, in the middle of the head, of
        /// the body or of an upload. Bytes count as libcurl hands them over: a header line
        /// once it is whole, body bytes as they are decoded (a TLS record once it is whole).
        ///
        /// The clock starts when the request goes out on a connection (once it is made, TLS
        /// included): making the connection is ``connect``'s to bound, so an idle limit shorter
        /// than a slow handshake does not end it. A streamed body whose consumer is behind
        /// (the transfer paused for it) does not count as a stall: the clock starts again when
        /// the consumer catches up.
        ///
        /// Defaults to 60 seconds, as URLSession's request time-out and aria2's `--timeout`:
        /// long enough for a slow server to think, short enough that a server that went silent
        /// frees its queue slot. A long poll or an event stream whose quiet gaps may be longer
        /// should set a longer limit, or `nil` for none.
        public var idle: Duration?
        /// Time allowed from when a request has been sent (its body included) to when its
        /// response head is complete; after a redirect, the next request's head has the same
        /// time again. Bounds a server that trickles its head byte by byte, which the
        /// ``idle`` limit never sees as a stall.
        ///
        /// Defaults to 60 seconds: a head is a few hundred bytes, and a server that has not
        /// sent one in that time is either stalling or trickling.
        public var head: Duration?
        /// The lowest speed a transfer may keep up: it fails when it moved fewer than
        /// ``LowSpeed/bytesPerSecond`` for ``LowSpeed/duration`` on end, as curl's
        /// `--speed-limit`/`--speed-time` (libcurl's CURLOPT_LOW_SPEED_LIMIT and _TIME). `nil`
        /// (the default) for none. Bounds a server that trickles a body, which ``idle`` never
        /// sees as a stall.
        ///
        /// libcurl checks it about once a second against the transfer's current speed, an
        /// average over the last few seconds, so it fails between `duration` and a few seconds
        /// later, never earlier. Time spent paused for a streamed body's consumer does not
        /// count. A ``Request/maxReceiveSpeed`` below `bytesPerSecond` fails every transfer.
        public var lowSpeed: LowSpeed?

        /// A lowest speed: see ``Timeouts/lowSpeed``.
        public struct LowSpeed: Hashable, Sendable {
            /// Bytes per second, 1 or more.
            public var bytesPerSecond: Int
            /// How long the speed may stay below it; whole seconds (a fraction is rounded up),
            /// at least one.
            public var duration: Duration

            /// Creates a lowest speed of `bytesPerSecond` kept for `duration`.
            public init(bytesPerSecond: Int, duration: Duration) {
                self.bytesPerSecond = bytesPerSecond
                self.duration = duration
            }
        }

        /// Creates timeouts: by default 30 seconds to connect, 60 seconds idle, 60 seconds for
        /// the response head, and no total limit or lowest speed.
        public init(
            connect: Duration? = .seconds(30), total: Duration? = nil, idle: Duration? = .seconds(60),
            head: Duration? = .seconds(60), lowSpeed: LowSpeed? = nil
        ) {
            self.connect = connect
            self.total = total
            self.idle = idle
            self.head = head
            self.lowSpeed = lowSpeed
        }
    }

    /// Whether redirects are followed.
    public enum RedirectPolicy: Hashable, Sendable {
        /// The 3xx response is returned as it is.
        case none
        /// Redirects are followed up to `max` times; one more fails with curl's
        /// `CURLE_TOO_MANY_REDIRECTS`.
        ///
        /// The header fields the caller set do not go to another origin (scheme, host and
        /// port) than the request's: from the first hop that leaves it on, only
        /// ``Request/fieldsSentToAnyOrigin`` and ``Request/fieldsAllowedAcrossOrigins`` are
        /// sent. This holds for every redirect status, 301 to 308, and every method.
        ///
        /// A 301 or 302 after a POST is followed with a GET, without the body; a 303 with a
        /// GET (a HEAD stays a HEAD); a 307 or 308 with the same method and body (a body file
        /// is read again). For a method other than GET, HEAD, POST and PUT (DELETE, PATCH, …),
        /// which libcurl 7.88 would keep, a 303 is the response instead.
        case follow(max: Int)
    }

    /// How HTTPS servers are trusted. Verification of the peer and of its host name is on;
    /// these options add trust anchors or narrow trust down to a key. There is no option that
    /// quietly trusts every server: the one way to switch verification off is
    /// ``insecureSkipsVerificationForLocalTestingOnly``, named to be seen in review.
    public struct TLSOptions: Hashable, Sendable {
        /// A PEM file of CA certificates to trust instead of the system's.
        public var caFile: String?
        /// A folder of hashed CA certificates (as made by `c_rehash`) to trust.
        public var caDirectory: String?
        /// A pinned public key: `sha256//<base64>` (several joined with `;`) or a PEM/DER
        /// file path. A server whose key does not match fails.
        public var pinnedPublicKey: String?
        /// **Insecure.** Accepts any certificate for any host name: anyone on the network path
        /// can read and change the traffic. For a local test server only; every transfer with
        /// it on logs a warning. A ``pinnedPublicKey``, if given, is still checked.
        public var insecureSkipsVerificationForLocalTestingOnly = false

        /// Creates TLS options.
        public init(caFile: String? = nil, caDirectory: String? = nil, pinnedPublicKey: String? = nil) {
            self.caFile = caFile
            self.caDirectory = caDirectory
            self.pinnedPublicKey = pinnedPublicKey
        }
    }
}
