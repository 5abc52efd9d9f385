import Foundation

/// Speeds on the command line and in input files: `--limit-rate`, `--max-overall-rate`,
/// `--speed-limit` and `max-download-limit=` (curl's and aria2's bandwidth limits and lowest
/// speed). No ArgumentParser here: the input file (and its fuzz target) use it.
package enum Rate {
    /// Bytes per second from `500`, `500K`, `2M`, `1G` (also `1.5M`; `k`, `m`, `g` and a
    /// trailing `B` or `/s` accepted), binary multiples as curl's `--limit-rate` and aria2's:
    /// K = 1024. Nil for anything else, zero or less, or more than 2^53.
    package static func parse(_ text: String) -> Int64? {
        var rest = Substring(text.trimmingCharacters(in: .whitespaces).lowercased())
        if rest.hasSuffix("/s") { rest = rest.dropLast(2) }
        if rest.hasSuffix("b"), rest.count > 1 { rest = rest.dropLast() }
        var multiple = 1.0
        switch rest.last {
        case "k": multiple = 1024
        case "m": multiple = 1024 * 1024
        case "g": multiple = 1024 * 1024 * 1024
        default: break
        }
        if multiple > 1 { rest = rest.dropLast() }
        guard !rest.isEmpty, rest.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
              let number = Double(rest), number.isFinite else { return nil }
        let bytes = (number * multiple).rounded()
        guard bytes >= 1, bytes <= 9_007_199_254_740_992 else { return nil }
        return Int64(bytes)
    }
}
