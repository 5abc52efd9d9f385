import CurlQueue

extension Job {
    /// The digests to compute for this file: its checksum's, and sha256 for `--json`.
    func digestsWanted(everything: Bool) -> Set<DigestAlgorithm> {
        var wanted: Set<DigestAlgorithm> = everything ? [.sha256] : []
        if let checksum { wanted.insert(checksum.algorithm) }
        return wanted
    }
}
