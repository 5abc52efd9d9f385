/// SHA-256 by OpenSSL's libcrypto (through ``FileDigests``), fed incrementally so that data of
/// any size is hashed in constant memory. Not copyable: a copy would share the running context.
package struct SHA256: ~Copyable {
    private let digests = FileDigests([.sha256])!

    package init() {}

    package mutating func update(_ bytes: UnsafeRawBufferPointer) {
        digests.update(bytes)
    }

    package mutating func update<Bytes: Sequence<UInt8>>(_ bytes: Bytes) {
        let array = Array(bytes)
        array.withUnsafeBytes { digests.update($0) }
    }

    /// The digest as 64 lowercase hexadecimal digits.
    package consuming func finalize() -> String {
        digests.finish()[.sha256]!
    }

    /// The digest of `bytes`.
    package static func hex<Bytes: Sequence<UInt8>>(of bytes: Bytes) -> String {
        FileDigests.hex(.sha256, of: bytes)
    }

    /// HMAC-SHA-256 (RFC 2104) of `message` under `key`, as 64 lowercase hexadecimal digits.
    package static func hmacHex(key: [UInt8], message: [UInt8]) -> String {
        FileDigests.hmacSHA256Hex(key: key, message: message)
    }

    package enum FileError: Error, Equatable {
        /// `shouldStop` said to stop.
        case stopped
        case unreadable(String)
    }

    /// The digest of the file at `path`, read 256 KiB at a time. `shouldStop` is asked
    /// between reads, so that a large file can be abandoned (on Ctrl-C).
    package static func hex(ofFileAt path: String, shouldStop: () -> Bool = { false }) throws(FileError) -> String {
        try FileDigests.hex([.sha256], ofFileAt: path, shouldStop: shouldStop)[.sha256]!
    }
}
