/// A parsed single-range `Range: bytes=…` header (`/bytes/N` of the demo server and of the test
/// fixture).
package enum ByteRange: Equatable {
    /// No usable Range header (absent, not `bytes=`, several ranges, or malformed): send it all.
    case none
    /// Send bytes `first...last` (already clamped to the body) with 206.
    case satisfiable(first: Int, last: Int)
    /// Answer 416.
    case unsatisfiable

    /// Parses `bytes=A-`, `bytes=A-B` and `bytes=-SUFFIX` against a body of `total` bytes.
    package init(header: String?, total: Int) {
        guard let header else {
            self = .none
            return
        }
        let trimmed = header.trimmingSpaces()
        guard trimmed.lowercased().hasPrefix("bytes=") else {
            self = .none
            return
        }
        let spec = String(trimmed.dropFirst("bytes=".count)).trimmingSpaces()
        let parts = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard !spec.contains(","), parts.count == 2 else {
            self = .none
            return
        }
        let firstText = parts[0].trimmingSpaces()
        let lastText = parts[1].trimmingSpaces()
        if firstText.isEmpty {
            guard let suffix = lastText.nonNegativeInt else {
                self = .none
                return
            }
            self = suffix == 0 || total == 0 ? .unsatisfiable : .satisfiable(first: max(0, total - suffix), last: total - 1)
            return
        }
        guard let first = firstText.nonNegativeInt else {
            self = .none
            return
        }
        var last = total - 1
        if !lastText.isEmpty {
            guard let requestedLast = lastText.nonNegativeInt, requestedLast >= first else {
                self = .none
                return
            }
            last = min(requestedLast, total - 1)
        }
        self = first >= total ? .unsatisfiable : .satisfiable(first: first, last: last)
    }
}

extension String {
    /// The value of a plain run of decimal digits, or `nil` (no sign, no spaces, no overflow).
    fileprivate var nonNegativeInt: Int? {
        guard !isEmpty, allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int(self)
    }
}

extension StringProtocol {
    fileprivate func trimmingSpaces() -> String {
        var slice = Substring(self)
        while slice.first == " " || slice.first == "\t" { slice.removeFirst() }
        while slice.last == " " || slice.last == "\t" { slice.removeLast() }
        return String(slice)
    }
}
