import CCrypto
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A digest algorithm for the bytes of a downloaded file (``Request/fileDigests``).
public enum DigestAlgorithm: String, Sendable, Hashable, CaseIterable {
    /// SHA-256 (64 hexadecimal digits).
    case sha256
    /// SHA-512 (128 hexadecimal digits).
    case sha512
    /// SHA-1 (40 hexadecimal digits). Broken for collisions: for legacy mirrors only.
    case sha1
    /// MD5 (32 hexadecimal digits). Broken for collisions: for legacy mirrors only.
    case md5

    /// The number of hexadecimal digits of a digest.
    public var hexLength: Int {
        switch self {
        case .sha256: 64
        case .sha512: 128
        case .sha1: 40
        case .md5: 32
        }
    }

    fileprivate var evp: OpaquePointer? {
        switch self {
        case .sha256: EVP_sha256()
        case .sha512: EVP_sha512()
        case .sha1: EVP_sha1()
        case .md5: EVP_md5()
        }
    }
}

/// Running digests of the bytes written to a ``DestinationFile``, with OpenSSL's libcrypto
/// (already linked for libcurl's TLS), which also backs ``SHA256``.
///
/// Confined to the engine thread, like the file it belongs to; a reference so that the
/// `DestinationFile` value that holds it stays cheap to copy, and its contexts are freed once.
package final class FileDigests {
    private var contexts: [(algorithm: DigestAlgorithm, context: OpaquePointer)] = []

    /// Digests of `algorithms`; nil when there are none to compute.
    package init?(_ algorithms: Set<DigestAlgorithm>) {
        guard !algorithms.isEmpty else { return nil }
        for algorithm in DigestAlgorithm.allCases where algorithms.contains(algorithm) {
            guard let context = EVP_MD_CTX_new() else { return nil }
            guard EVP_DigestInit_ex(context, algorithm.evp, nil) == 1 else {
                EVP_MD_CTX_free(context)
                return nil
            }
            contexts.append((algorithm, context))
        }
    }

    deinit {
        for entry in contexts { EVP_MD_CTX_free(entry.context) }
    }

    package func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        for entry in contexts { _ = EVP_DigestUpdate(entry.context, base, bytes.count) }
    }

    /// The digests, lowercase hex. Call once, after the last ``update(_:)``.
    package func finish() -> [DigestAlgorithm: String] {
        var result: [DigestAlgorithm: String] = [:]
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        for entry in contexts {
            var length: UInt32 = 0
            guard EVP_DigestFinal_ex(entry.context, &digest, &length) == 1 else { continue }
            result[entry.algorithm] = Self.hex(digest[..<Int(length)])
        }
        return result
    }

    /// The digest of a buffer, lowercase hex.
    package static func hex(_ algorithm: DigestAlgorithm, of bytes: some Sequence<UInt8>) -> String {
        let digests = FileDigests([algorithm])!
        let array = Array(bytes)
        array.withUnsafeBytes { digests.update($0) }
        return digests.finish()[algorithm]!
    }

    /// The digests of a file read from disk: for a file whose bytes did not all pass through
    /// a transfer (a resumed download's first part came in an earlier run; a file already
    /// there). `shouldStop` is asked between reads of 256 KiB.
    package static func hex(
        _ algorithms: Set<DigestAlgorithm>, ofFileAt path: String, shouldStop: () -> Bool = { false }
    ) throws(SHA256.FileError) -> [DigestAlgorithm: String] {
        guard let digests = FileDigests(algorithms) else { return [:] }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .unreadable("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            if shouldStop() { throw .stopped }
            let count = read(descriptor, buffer.baseAddress, buffer.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw .unreadable("cannot read \(path): \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            digests.update(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
        }
        return digests.finish()
    }

    /// HMAC-SHA-256 (RFC 2104) by libcrypto, lowercase hex.
    package static func hmacSHA256Hex(key: [UInt8], message: [UInt8]) -> String {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let done = HMAC(EVP_sha256(), key, Int32(key.count), message, message.count, &digest, &length)
        precondition(done != nil, "libcrypto's HMAC failed")
        return hex(digest[..<Int(length)])
    }

    private static func hex(_ bytes: ArraySlice<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
