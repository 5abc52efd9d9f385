public import Foundation

/// The request of a durable job: a `Codable` description of a ``CurlQueue/Request`` that any
/// worker can run, with no closures and no secrets in it.
///
/// Paths are what make a job machine-bound, so they are kept apart: ``destination`` is
/// relative to the worker's download folder (the same job downloads into each worker's own
/// folder), and a ``Body/file(_:)`` body names a file on the machine that runs the job.
public struct JobRequest: Codable, Sendable, Hashable {
    /// One header field, in order (a field may repeat).
    public struct Field: Codable, Sendable, Hashable {
        /// The field name, as sent.
        public var name: String
        /// The field value, as sent.
        public var value: String
        /// A field.
        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    /// The body sent with the request.
    public enum Body: Codable, Sendable, Hashable {
        /// Bytes stored in the job itself, up to ``JobSpec/Limits/maxInlineBody``.
        case inline(Data)
        /// A file read when the job runs, on the machine that runs it: an absolute path.
        case file(String)
    }

    /// The digest a downloaded file must have: checked as its bytes arrive (with the core's
    /// ``CurlQueue/Request/fileDigests``; from disk for a resumed file). A mismatch fails the
    /// attempt like any retryable failure and removes the file.
    public struct Checksum: Codable, Sendable, Hashable {
        /// `sha256`, `sha512`, `sha1` or `md5` (``CurlQueue/DigestAlgorithm``).
        public var algorithm: String
        /// The digest in hexadecimal (compared in lowercase).
        public var hex: String
        /// A checksum; checked by ``JobSpec/validated(limits:)``.
        public init(algorithm: String, hex: String) {
            self.algorithm = algorithm
            self.hex = hex
        }
    }

    /// Timeouts, in seconds (nil: the core's default). Mirrors ``CurlQueue/Request/Timeouts``.
    public struct Timeouts: Codable, Sendable, Hashable {
        /// For the connection (``CurlQueue/Request/Timeouts/connect``).
        public var connect: Double?
        /// For the whole attempt (``CurlQueue/Request/Timeouts/total``).
        public var total: Double?
        /// With no byte moving (``CurlQueue/Request/Timeouts/idle``).
        public var idle: Double?
        /// Until the response head (``CurlQueue/Request/Timeouts/head``).
        public var head: Double?
        /// Timeouts; nil leaves the core's default.
        public init(connect: Double? = nil, total: Double? = nil, idle: Double? = nil, head: Double? = nil) {
            self.connect = connect
            self.total = total
            self.idle = idle
            self.head = head
        }
    }

    /// The URL as given: http or https.
    public var url: String
    /// Other URLs of the same file (mirrors), as aria2's several URIs of one download: attempt
    /// *n* of the job goes to ``urls``[(n − 1) mod count], so each retry tries the next
    /// server and the list is gone round within the job's attempts (give
    /// ``JobRetryPolicy/maxAttempts`` at least ``urls``' count for each to be tried). A
    /// `.part` from one server is resumed at the next only when its validator still holds
    /// there (If-Range); otherwise the file comes whole. Empty: only ``url``.
    public var mirrors: [String]
    /// The method, e.g. "GET".
    public var method: String
    /// Header fields, in order. `Authorization`, `Cookie` and `Proxy-Authorization` are refused
    /// here (see ``JobSpec/credential``).
    public var headerFields: [Field]
    /// The body, if any.
    public var body: Body?
    /// Where the response body goes, relative to the worker's download folder: no leading
    /// `/`, no `..` component. Nil: the body is kept in memory and handed to the handler.
    public var destination: String?
    /// Resume an interrupted download from its `.part` file (with Range / If-Range).
    public var resume: Bool
    /// Time limits of each attempt.
    public var timeouts: Timeouts
    /// The largest response body accepted, in bytes (nil: no limit but the core's in-memory one).
    public var maxResponseBodySize: Int64?
    /// The digest the downloaded file must have (needs a ``destination``). Nil: not checked.
    public var checksum: Checksum?
    /// The most bytes per second this job receives (``CurlQueue/Request/maxReceiveSpeed``);
    /// nil: the worker's default, if any.
    public var maxBytesPerSecond: Int64?

    /// A request; checked by ``JobSpec/validated(limits:)`` when enqueued.
    public init(
        url: String,
        method: String = "GET",
        headerFields: [Field] = [],
        body: Body? = nil,
        destination: String? = nil,
        resume: Bool = true,
        timeouts: Timeouts = .init(),
        maxResponseBodySize: Int64? = nil,
        checksum: Checksum? = nil,
        mirrors: [String] = [],
        maxBytesPerSecond: Int64? = nil
    ) {
        self.url = url
        self.mirrors = mirrors
        self.maxBytesPerSecond = maxBytesPerSecond
        self.method = method
        self.headerFields = headerFields
        self.body = body
        self.destination = destination
        self.resume = resume
        self.timeouts = timeouts
        self.maxResponseBodySize = maxResponseBodySize
        self.checksum = checksum
    }

    /// ``url``, then its ``mirrors``.
    public var urls: [String] { [url] + mirrors }

    /// The URL attempt `attempt` (1 for the first) goes to: the next of ``urls`` each time.
    public func url(forAttempt attempt: Int) -> String {
        let urls = self.urls
        return urls[(max(attempt, 1) - 1) % urls.count]
    }

    private enum CodingKeys: String, CodingKey {
        case url, mirrors, method, headerFields, body, destination, resume, timeouts, maxResponseBodySize, checksum
        case maxBytesPerSecond
    }

    /// Decodes a request; ``mirrors`` and ``maxBytesPerSecond`` may be absent (jobs stored
    /// before they existed).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        url = try container.decode(String.self, forKey: .url)
        mirrors = try container.decodeIfPresent([String].self, forKey: .mirrors) ?? []
        method = try container.decode(String.self, forKey: .method)
        headerFields = try container.decode([Field].self, forKey: .headerFields)
        body = try container.decodeIfPresent(Body.self, forKey: .body)
        destination = try container.decodeIfPresent(String.self, forKey: .destination)
        resume = try container.decode(Bool.self, forKey: .resume)
        timeouts = try container.decode(Timeouts.self, forKey: .timeouts)
        maxResponseBodySize = try container.decodeIfPresent(Int64.self, forKey: .maxResponseBodySize)
        checksum = try container.decodeIfPresent(Checksum.self, forKey: .checksum)
        maxBytesPerSecond = try container.decodeIfPresent(Int64.self, forKey: .maxBytesPerSecond)
    }

    /// Encodes a request; ``mirrors`` only when there are some, so that a request without
    /// them encodes (and hashes, ``JobSpec/dedupKey``) as it did before they existed.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(url, forKey: .url)
        if !mirrors.isEmpty { try container.encode(mirrors, forKey: .mirrors) }
        try container.encode(method, forKey: .method)
        try container.encode(headerFields, forKey: .headerFields)
        try container.encodeIfPresent(body, forKey: .body)
        try container.encodeIfPresent(destination, forKey: .destination)
        try container.encode(resume, forKey: .resume)
        try container.encode(timeouts, forKey: .timeouts)
        try container.encodeIfPresent(maxResponseBodySize, forKey: .maxResponseBodySize)
        try container.encodeIfPresent(checksum, forKey: .checksum)
        try container.encodeIfPresent(maxBytesPerSecond, forKey: .maxBytesPerSecond)
    }

    /// `scheme://host:port` of ``url``, lowercased, with the default port filled in: the key of
    /// per-origin limits. Empty when the URL does not parse.
    public var origin: String {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            let host = components.host?.lowercased()
        else { return "" }
        let port = components.port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\(host):\(port)"
    }
}
