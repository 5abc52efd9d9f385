import CurlQueueDurable

/// aria2's GIDs for the store's jobs: the job id in 16 lowercase hexadecimal digits, zero
/// padded (job 1 is `0000000000000001`). Stable across daemons and restarts, the same on every
/// daemon of one store, and read back exactly: a GID is a job id.
enum GID {
    static func of(_ id: JobID) -> String {
        let hex = String(UInt64(bitPattern: id), radix: 16)
        return String(repeating: "0", count: max(0, 16 - hex.count)) + hex
    }

    /// The job id of a GID of 16 hexadecimal digits (either case); nil for anything else.
    static func job(_ gid: String) -> JobID? {
        guard gid.utf8.count == 16, gid.unicodeScalars.allSatisfy(\.properties.isASCIIHexDigit),
              let value = UInt64(gid, radix: 16), value > 0, value <= UInt64(Int64.max) else { return nil }
        return JobID(value)
    }
}
