/// A request target (`/path?query`) split into its path and its query parameters.
package struct RequestTarget {
    /// Everything before `?`, not percent-decoded.
    package var path: String
    /// Everything after `?`, or `nil` if there is no `?`.
    package var rawQuery: String?
    /// Query parameters, names and values percent-decoded (`+` is left alone: it is not a space
    /// here). A parameter given more than once keeps its last value; one without `=` has value "".
    package var query: [String: String]

    package init(uri: String) {
        if let questionMark = uri.firstIndex(of: "?") {
            path = String(uri[..<questionMark])
            let raw = String(uri[uri.index(after: questionMark)...])
            rawQuery = raw
            var query: [String: String] = [:]
            for pair in raw.split(separator: "&", omittingEmptySubsequences: true) {
                if let equals = pair.firstIndex(of: "=") {
                    let name = Self.percentDecode(pair[..<equals])
                    query[name] = Self.percentDecode(pair[pair.index(after: equals)...])
                } else {
                    query[Self.percentDecode(pair)] = ""
                }
            }
            self.query = query
        } else {
            path = uri
            rawQuery = nil
            query = [:]
        }
    }

    /// The path's segments after the leading `/`, percent-decoded: `/gate/a%20b` → `["gate", "a b"]`.
    package var segments: [String] {
        path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map { Self.percentDecode($0) }
    }

    /// The query parameter `name` as an integer (a leading `+` or `-` is allowed), or `nil` if it
    /// is absent or not a number.
    package func int(_ name: String) -> Int? {
        query[name].flatMap { Int($0) }
    }

    /// Whether the query parameter `name` is present and not `0`/`false`/`no`.
    package func flag(_ name: String) -> Bool {
        guard let value = query[name] else { return false }
        return !["0", "false", "no"].contains(value.lowercased())
    }

    /// Decodes `%XX` escapes; malformed escapes are kept literally and invalid UTF-8 is repaired.
    static func percentDecode(_ text: some StringProtocol) -> String {
        guard text.contains("%") else { return String(text) }
        let utf8 = Array(text.utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count)
        var index = 0
        while index < utf8.count {
            if utf8[index] == UInt8(ascii: "%"), index + 2 < utf8.count,
                let high = hexValue(utf8[index + 1]), let low = hexValue(utf8[index + 2])
            {
                bytes.append(high << 4 | low)
                index += 3
            } else {
                bytes.append(utf8[index])
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
