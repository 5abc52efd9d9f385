import CurlQueue
import HTTPTypes

/// The directives of `Cache-Control` fields that the cache acts on (RFC 9111 §5.2).
///
/// Every `Cache-Control` line counts, directives are separated by commas outside quoted
/// strings, and names are case-insensitive. A `max-age` that is not a number counts as 0
/// (stale), as RFC 9111 advises; when a directive repeats, the strictest value wins.
struct CacheControl: Equatable {
    var maxAge: Int?
    var maxStale: Int?
    /// `max-stale` with no value: any staleness is accepted.
    var acceptsAnyStale = false
    var minFresh: Int?
    var noStore = false
    var noCache = false
    var mustRevalidate = false
    var onlyIfCached = false
    /// `public`: a shared cache may store it even for a request with `Authorization`.
    var isPublic = false
    /// `private` (with or without field names): a shared cache must not store it.
    var isPrivate = false
    /// `s-maxage`: a shared cache's freshness lifetime, replacing `max-age`.
    var sharedMaxAge: Int?

    init() {}

    init(_ fields: HTTPFields) {
        for line in fields[values: .cacheControl] {
            for directive in Self.split(line) { apply(directive) }
        }
    }

    private mutating func apply(_ directive: Substring) {
        let parts = directive.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        let name = parts[0].trimmingSpaces.lowercased()
        let value: Substring? = parts.count == 2 ? Self.unquoted(parts[1].trimmingSpaces) : nil
        switch name {
        case "max-age": maxAge = Self.smaller(maxAge, Self.seconds(value))
        case "max-stale":
            if value == nil { acceptsAnyStale = true } else { maxStale = Self.smaller(maxStale, Self.seconds(value)) }
        case "min-fresh": minFresh = max(minFresh ?? 0, Self.seconds(value))
        case "no-store": noStore = true
        case "no-cache": noCache = true
        case "must-revalidate", "proxy-revalidate": mustRevalidate = true
        case "only-if-cached": onlyIfCached = true
        case "public": isPublic = true
        case "private": isPrivate = true
        case "s-maxage": sharedMaxAge = Self.smaller(sharedMaxAge, Self.seconds(value))
        default: break
        }
    }

    /// A delta-seconds value; anything else is 0. Huge values are capped at 2^31 (RFC 9111
    /// §1.2.2); leading zeros count for nothing (`00000000060` is a minute).
    static func seconds(_ value: Substring?) -> Int {
        guard let value, !value.isEmpty, value.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return 0 }
        let significant = value.drop(while: { $0 == "0" })
        if significant.utf8.count > 10 { return 1 << 31 }
        return min(Int(significant) ?? 0, 1 << 31)
    }

    private static func smaller(_ old: Int?, _ new: Int) -> Int { old.map { min($0, new) } ?? new }

    private static func unquoted(_ value: Substring) -> Substring {
        if value.count >= 2, value.first == "\"", value.last == "\"" { return value.dropFirst().dropLast() }
        return value
    }

    /// Splits a field value at commas that are not inside a quoted string.
    static func split(_ line: String) -> [Substring] {
        var result: [Substring] = []
        var start = line.startIndex
        var quoted = false
        var escaped = false
        var index = line.startIndex
        while index < line.endIndex {
            let character = line[index]
            if escaped {
                escaped = false
            } else if quoted, character == "\\" {
                escaped = true
            } else if character == "\"" {
                quoted.toggle()
            } else if character == ",", !quoted {
                result.append(line[start..<index])
                start = line.index(after: index)
            }
            index = line.index(after: index)
        }
        result.append(line[start...])
        return result.filter { !$0.trimmingSpaces.isEmpty }
    }
}

extension Substring {
    var trimmingSpaces: Substring {
        var result = self
        while let first = result.first, first == " " || first == "\t" { result = result.dropFirst() }
        while let last = result.last, last == " " || last == "\t" { result = result.dropLast() }
        return result
    }
}
