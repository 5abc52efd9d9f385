import CurlQueueDownloads

/// curlq's version: the one place it is defined. `--version` and the default `User-Agent`
/// (`curlq/VERSION`) both read it.
enum CurlqVersion {
    static let number = "0.1.0"

    /// The `User-Agent` sent unless `-A` or a `User-Agent` header says otherwise: some servers
    /// refuse a request without one.
    static let userAgent = "curlq/\(number)"
}

extension HeaderField {
    /// The header fields of one request: `-H` merged with the URL's own `header=` lines
    /// (``merge(global:own:)``), then `User-Agent: userAgent` unless one of them names a
    /// `User-Agent` already (a header given by hand wins over `-A` and the default).
    static func forRequest(global: [HeaderField], own: [HeaderField], userAgent: String) -> [HeaderField] {
        let merged = merge(global: global, own: own)
        if userAgent.isEmpty || merged.contains(where: { $0.name.lowercased() == "user-agent" }) { return merged }
        return merged + [HeaderField(name: "User-Agent", value: userAgent)]
    }
}
