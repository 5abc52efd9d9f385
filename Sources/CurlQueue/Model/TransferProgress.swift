/// How far an upload or a download has come.
public struct TransferProgress: Hashable, Sendable {
    /// Bytes moved so far. For a resumed download this includes the bytes already on disk,
    /// from the first report on (none comes before the response head).
    public var bytesTransferred: Int64
    /// The expected total, or `nil` when the server did not say (a download's is known from
    /// its head on; a resumed one's includes the bytes on disk).
    public var totalBytes: Int64?

    /// Creates a progress value.
    public init(bytesTransferred: Int64, totalBytes: Int64?) {
        self.bytesTransferred = bytesTransferred
        self.totalBytes = totalBytes
    }

    /// The fraction done, in 0...1, or `nil` when the total is unknown. Never NaN or infinite.
    public var fraction: Double? {
        guard let total = totalBytes, total > 0 else { return totalBytes == 0 ? 1 : nil }
        return min(1, max(0, Double(bytesTransferred) / Double(total)))
    }
}
