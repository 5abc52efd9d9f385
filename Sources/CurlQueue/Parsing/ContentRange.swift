/// A `Content-Range: bytes first-last/complete` value (RFC 9110 §14.4), where `complete` may
/// be `*`. Anything else, including `first > last`, parses as nil.
struct ContentRange: Hashable {
    var first: Int64
    var last: Int64
    var completeLength: Int64?

    init?(_ value: String) {
        var rest = Substring(value).drop(while: { $0 == " " })
        guard rest.lowercased().hasPrefix("bytes ") else { return nil }
        rest = rest.dropFirst(6).drop(while: { $0 == " " })
        guard let dash = rest.firstIndex(of: "-"), let slash = rest.firstIndex(of: "/"), dash < slash,
              let first = Self.number(rest[..<dash]),
              let last = Self.number(rest[rest.index(after: dash)..<slash]),
              first <= last else { return nil }
        let tail = rest[rest.index(after: slash)...].trimmingSuffix(while: { $0 == " " })
        if tail == "*" {
            completeLength = nil
        } else {
            guard let complete = Self.number(tail), last < complete else { return nil }
            completeLength = complete
        }
        self.first = first
        self.last = last
    }

    /// The complete length of a 416's `Content-Range: bytes */N`, or nil for anything else.
    static func unsatisfiedCompleteLength(_ value: String) -> Int64? {
        var rest = Substring(value).drop(while: { $0 == " " })
        guard rest.lowercased().hasPrefix("bytes ") else { return nil }
        rest = rest.dropFirst(6).drop(while: { $0 == " " })
        guard rest.hasPrefix("*/") else { return nil }
        return number(rest.dropFirst(2).trimmingSuffix(while: { $0 == " " }))
    }

    private static func number(_ text: Substring) -> Int64? {
        guard !text.isEmpty, text.count <= 18, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        return Int64(text)
    }
}

private extension Substring {
    func trimmingSuffix(while predicate: (Character) -> Bool) -> Substring {
        var end = endIndex
        while end > startIndex, predicate(self[index(before: end)]) { end = index(before: end) }
        return self[startIndex..<end]
    }
}
