import CurlQueue

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
                    let name = TextEscaping.percentDecoded(pair[..<equals])
                    query[name] = TextEscaping.percentDecoded(pair[pair.index(after: equals)...])
                } else {
                    query[TextEscaping.percentDecoded(pair)] = ""
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
        path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map { TextEscaping.percentDecoded($0) }
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
}
