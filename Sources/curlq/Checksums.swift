import CurlQueue

/// An expected digest of a file (`sha256=`, `sha512=`, `sha1=` or `md5=` in the input file).
///
/// The transfer computes it as the bytes are written (``Request/fileDigests``, with OpenSSL's
/// libcrypto); only a file whose first bytes were not written by this transfer (a resumed
/// `.part`, a file already there) is hashed from disk.
struct Checksum: Equatable, Sendable {
    var algorithm: DigestAlgorithm
    /// Lowercase hex.
    var hex: String
}

extension Job {
    /// The digests to compute for this file: its checksum's, and sha256 for `--json`.
    func digestsWanted(everything: Bool) -> Set<DigestAlgorithm> {
        var wanted: Set<DigestAlgorithm> = everything ? [.sha256] : []
        if let checksum { wanted.insert(checksum.algorithm) }
        return wanted
    }
}
