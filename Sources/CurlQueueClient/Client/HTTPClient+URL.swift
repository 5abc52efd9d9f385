import CurlQueue
public import Foundation

extension HTTPClient {
    /// The URL a call to `path` with `query` goes to, on the base URL or (`useCDN`) the CDN URL.
    ///
    /// The path is appended to the base URL's path: `users/1` and `/users/1` on
    /// `https://api.example.org/v1` both give `https://api.example.org/v1/users/1`. Characters
    /// a path may not hold (a space, non-ASCII letters, a lone `%`) are percent-encoded;
    /// valid `%XX` escapes are kept as they are.
    ///
    /// - Throws: ``HTTPClientError/invalidPath(_:reason:)`` for a path that could reach
    ///   another origin or another part of the server than the one meant: one with a scheme
    ///   (`https://…`, `mailto:`), starting with `//`, holding `\`, `?`, `#`, a control
    ///   character or a `.` or `..` segment — also written `%2e`, behind an encoded slash or
    ///   backslash (`..%2f`, `%5c..`) or with parameters (`..;`), as servers may decode them.
    ///   Query items go in `query`, never in the path.
    public func url(for path: String, query: [URLQueryItem] = [], useCDN: Bool = false) throws(HTTPClientError) -> URL {
        let base = useCDN ? (configuration.cdnURL ?? configuration.baseURL) : configuration.baseURL
        let encodedPath = try Self.encodedPath(path)
        var string = base.absoluteString
        var baseQuery: Substring?
        if let fragment = string.firstIndex(of: "#") { string = String(string[..<fragment]) }
        if let questionMark = string.firstIndex(of: "?") {
            baseQuery = string[string.index(after: questionMark)...]
            string = String(string[..<questionMark])
        }
        while string.hasSuffix("/") { string.removeLast() }
        if !encodedPath.isEmpty { string += "/" + encodedPath }
        let queries = [baseQuery.map(String.init), query.isEmpty ? nil : PercentEncoding.query(query)]
            .compactMap { $0 }.filter { !$0.isEmpty }
        if !queries.isEmpty { string += "?" + queries.joined(separator: "&") }
        guard let url = URL(string: string) else {
            throw .invalidPath(path, reason: "does not make a valid URL with \(LoggingMiddleware.redacted(base))")
        }
        // Defence in depth: whatever the checks above missed, the origin must be the base's.
        guard url.scheme?.lowercased() == base.scheme?.lowercased(), url.host == base.host, url.port == base.port else {
            throw .invalidPath(path, reason: "would leave \(LoggingMiddleware.redacted(base))")
        }
        return url
    }

    /// `path` checked and percent-encoded, without leading slashes.
    static func encodedPath(_ path: String) throws(HTTPClientError) -> String {
        if path.hasPrefix("//") {
            throw .invalidPath(path, reason: "starts with \"//\", which names another host; give a path relative to the base URL")
        }
        var trimmed = Substring(path)
        while trimmed.first == "/" { trimmed.removeFirst() }
        if let colon = trimmed.firstIndex(of: ":"), !trimmed[..<colon].contains("/") {
            throw .invalidPath(path, reason: "has a URL scheme (\"\(trimmed[..<colon]):\"); absolute URLs are not allowed, give a path relative to the base URL")
        }
        for scalar in trimmed.unicodeScalars {
            switch scalar {
            case "\\":
                throw .invalidPath(path, reason: "holds a backslash")
            case "?", "#":
                throw .invalidPath(path, reason: "holds \"\(scalar)\"; pass query items separately")
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                throw .invalidPath(path, reason: "holds a control character")
            default:
                break
            }
        }
        for segment in trimmed.split(separator: "/", omittingEmptySubsequences: false) {
            // As a server or proxy may read it: `%2e` a dot, `%2f` and `%5c` (and `\`) a
            // slash, and `;…` a segment's parameters (`..;` is `..` to some servers).
            let decoded = segment.replacingOccurrences(of: "%2e", with: ".", options: .caseInsensitive)
                .replacingOccurrences(of: "%2f", with: "/", options: .caseInsensitive)
                .replacingOccurrences(of: "%5c", with: "/", options: .caseInsensitive)
            for piece in decoded.split(separator: "/", omittingEmptySubsequences: false) {
                let name = piece.prefix { $0 != ";" }
                if name == "." || name == ".." {
                    throw .invalidPath(path, reason: "has a \"\(name)\" segment, which would leave the base path")
                }
            }
        }
        return encodePathCharacters(trimmed)
    }

    /// Percent-encodes what RFC 3986 does not allow in a path; keeps valid `%XX` escapes.
    private static func encodePathCharacters(_ path: Substring) -> String {
        let bytes = Array(path.utf8)
        let hex = Array("0123456789ABCDEF".utf8)
        func isHex(_ byte: UInt8) -> Bool {
            (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
                || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
        }
        var result: [UInt8] = []
        result.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            let allowed: Bool
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"):
                allowed = true
            case UInt8(ascii: "%"):
                allowed = index + 2 < bytes.count && isHex(bytes[index + 1]) && isHex(bytes[index + 2])
            default:
                // unreserved, sub-delims, ":", "@" and "/"
                allowed = "-._~!$&'()*+,;=:@/".utf8.contains(byte)
            }
            if allowed {
                result.append(byte)
            } else {
                result.append(UInt8(ascii: "%"))
                result.append(hex[Int(byte >> 4)])
                result.append(hex[Int(byte & 0x0F)])
            }
            index += 1
        }
        return String(decoding: result, as: UTF8.self)
    }
}
