import Foundation
import CurlQueue

extension JobSpec {
    /// Limits a store applies at enqueue.
    public struct Limits: Sendable, Hashable {
        /// The largest inline body, in bytes. 1 MiB by default: bigger bodies go in a file.
        public var maxInlineBody: Int
        /// Header fields that may be stored in the clear although they are secrets. Empty by
        /// default: `Authorization`, `Cookie` and `Proxy-Authorization` are refused.
        public var allowedSecretFields: Set<String>
        public init(maxInlineBody: Int = 1 << 20, allowedSecretFields: Set<String> = []) {
            self.maxInlineBody = maxInlineBody
            self.allowedSecretFields = Set(allowedSecretFields.map { $0.lowercased() })
        }
    }

    /// The header fields that carry secrets, refused in a stored job (lowercased).
    public static let secretFields: Set<String> = ["authorization", "cookie", "proxy-authorization"]

    /// The key that makes two jobs equal: ``key`` when given, else the SHA-256 (hex) of the
    /// request's canonical JSON (sorted keys), so the same request gives the same key in every
    /// process and on every machine (unlike `hashValue`, which is seeded per process).
    public var dedupKey: String {
        if let key { return key }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let bytes = (try? encoder.encode(request)) ?? Data(request.url.utf8)
        return "sha256:" + SHA256.hex(of: bytes)
    }

    /// Whether a worker's death may be followed by another attempt: every method but POST and
    /// PATCH, and those when the job has an ``idempotencyKey``.
    public var isRescuable: Bool {
        let method = request.method.uppercased()
        return !(method == "POST" || method == "PATCH") || idempotencyKey != nil
    }

    /// The job, checked: throws ``JobSpecError`` when it cannot be stored as it is. Nothing
    /// is changed in it.
    public func validated(limits: Limits = .init()) throws(JobSpecError) -> JobSpec {
        if kind.isEmpty { throw .emptyKind }
        // Kept in columns of their own, where PostgreSQL's text cannot hold a NUL: refused in
        // every store alike (the rest of a job is JSON, where a NUL is `\u0000`, and round-trips).
        if kind.utf8.contains(0) { throw .nulCharacter("kind") }
        if key?.utf8.contains(0) == true { throw .nulCharacter("key") }
        for url in request.urls {
            guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
                scheme == "http" || scheme == "https", components.host?.isEmpty == false
            else { throw .badURL(url) }
        }
        let method = request.method
        if method.isEmpty || !method.allSatisfy({ $0.isLetter || $0 == "-" || $0 == "_" }) {
            throw .badMethod(method)
        }
        for field in request.headerFields {
            let name = field.name.lowercased()
            if Self.secretFields.contains(name) && !limits.allowedSecretFields.contains(name) {
                throw .secretInTheClear(field.name)
            }
            if field.name.isEmpty || field.name.contains(where: { $0 == ":" || $0.isWhitespace || $0.isNewline })
                || field.value.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" })
            {
                throw .badHeaderField(field.name)
            }
        }
        switch request.body {
        case .inline(let data) where data.count > limits.maxInlineBody:
            throw .bodyTooLarge(data.count, limit: limits.maxInlineBody)
        case .file(let path) where !path.hasPrefix("/"):
            throw .badBodyPath(path)
        default: break
        }
        if let destination = request.destination {
            let parts = destination.split(separator: "/", omittingEmptySubsequences: false)
            if destination.isEmpty || destination.hasPrefix("/") || destination.hasSuffix("/")
                || parts.contains(where: { $0 == ".." || $0 == "." || $0.isEmpty }) || destination.contains("\0")
            {
                throw .badDestination(destination)
            }
        }
        if retry.maxAttempts < 1 { throw .badRetryPolicy }
        if let rate = request.maxBytesPerSecond, rate < 1 { throw .badRateLimit(rate) }
        if let checksum = request.checksum {
            guard let algorithm = DigestAlgorithm(rawValue: checksum.algorithm.lowercased()),
                checksum.hex.count == algorithm.hexLength, checksum.hex.allSatisfy(\.isHexDigit), request.destination != nil
            else { throw .badChecksum(checksum.algorithm + "=" + checksum.hex) }
        }
        return self
    }
}

/// Why a job was refused at enqueue. Nothing was stored.
public enum JobSpecError: Error, Sendable, Hashable, CustomStringConvertible {
    case emptyKind
    case badURL(String)
    case badMethod(String)
    case badHeaderField(String)
    /// `Authorization`, `Cookie` or `Proxy-Authorization` in the clear: use ``JobSpec/credential``.
    case secretInTheClear(String)
    case bodyTooLarge(Int, limit: Int)
    case badBodyPath(String)
    /// Absolute, empty, or with a `..`/`.`/empty component: a destination stays in the worker's folder.
    case badDestination(String)
    case badRetryPolicy
    /// A ``JobRequest/maxBytesPerSecond`` under 1.
    case badRateLimit(Int64)
    /// An unknown algorithm, a digest of the wrong length or not hexadecimal, or no destination.
    case badChecksum(String)
    /// A NUL character in the job's `kind` or `key`, or in the queue's name (the field named),
    /// which a store keeps in a column of its own and PostgreSQL's text cannot hold.
    case nulCharacter(String)

    /// Throws ``nulCharacter(_:)`` for a queue name with a NUL character, which no store keeps
    /// (for the stores of this package, at enqueue).
    package static func checkQueueName(_ name: String) throws(JobSpecError) {
        if name.utf8.contains(0) { throw .nulCharacter("queue name") }
    }

    public var description: String {
        switch self {
        case .emptyKind: "the job has no handler kind"
        case .badURL(let url): "not an http(s) URL: \(url)"
        case .badMethod(let method): "not a method: \(method)"
        case .badHeaderField(let name): "bad header field: \(name)"
        case .secretInTheClear(let name):
            "\(name) would be stored in the clear: give the job a credential reference instead"
        case .bodyTooLarge(let size, let limit): "inline body of \(size) bytes over the limit of \(limit): use a file body"
        case .badBodyPath(let path): "a file body needs an absolute path: \(path)"
        case .badDestination(let path): "destination must be a relative path inside the worker's folder: \(path)"
        case .badRetryPolicy: "maxAttempts must be at least 1"
        case .badRateLimit(let rate): "maxBytesPerSecond must be at least 1, not \(rate)"
        case .badChecksum(let value):
            "bad checksum \(value): sha256, sha512, sha1 or md5 with its hexadecimal digest, for a job with a destination"
        case .nulCharacter(let field): "the job's \(field) holds a NUL character, which a store cannot keep there"
        }
    }
}
