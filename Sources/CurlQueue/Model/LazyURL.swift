import Foundation
import Synchronization

/// The URL of a request or response: a parsed `URL`, or a string kept as the caller gave it
/// and parsed into a `URL` only when someone asks for one.
///
/// libcurl takes a URL as a string and parses it itself, so a request built from a string
/// need not pay for `URL(string:)` (docs/performance.md) unless its caller reads
/// ``Request/url``. Only strings that ``isPlain(_:)`` accepts are kept as text:
/// `URL(string:)` takes those as they are, so the parsed URL, equality and hashing are what
/// they would have been had the string been parsed at once.
enum LazyURL: Hashable, Sendable {
    case parsed(URL)
    case text(Text)

    /// A plain URL string with its `URL`, parsed on the first read and kept.
    ///
    /// Shared by the copies of a request and read from any thread: the parsed URL is published
    /// once through an `AtomicLazyReference`. Two threads reading first at the same moment
    /// may both parse; one result is kept, and both are equal.
    final class Text: Sendable {
        let string: String
        /// The scheme's length in UTF-8 bytes (the string starts with `scheme://`).
        let schemeLength: Int
        private let parsed = AtomicLazyReference<SharedValue<URL>>()

        /// `string` must be plain (see ``LazyURL/isPlain(_:)``), its scheme `schemeLength` bytes.
        init(_ string: String, schemeLength: Int) {
            self.string = string
            self.schemeLength = schemeLength
        }

        var url: URL {
            if let box = parsed.load() { return box.value }
            // `URL(string:)` takes every plain string as it is (LazyURLTests check it on every
            // character in every part and on thousands of generated strings); the fallback
            // is never taken in a release build, and would not crash if it were.
            guard let url = URL(string: string) else {
                assertionFailure("URL(string:) refused a plain URL string: \(string.debugDescription)")
                return parsed.storeIfNil(SharedValue(URL(string: "invalid:")!)).value
            }
            return parsed.storeIfNil(SharedValue(url)).value
        }

        /// Whether the string was parsed into a `URL` (someone read it).
        var isParsed: Bool { parsed.load() != nil }

        /// The host as written: the authority up to its `:` (a plain string's host has no
        /// user info, brackets or escapes).
        var host: String { String(Substring(authority.prefix { $0 != UInt8(ascii: ":") })) }

        /// The port's digits after the host, or `nil` for none.
        var port: Int? {
            let authority = authority
            guard let colon = authority.firstIndex(of: UInt8(ascii: ":")) else { return nil }
            return Int(String(Substring(authority[authority.index(after: colon)...])))
        }

        /// The characters after `://` up to a `/`, `?`, `#` or the end: in a plain string, a
        /// host of unreserved characters and an optional `:` with one to five digits.
        private var authority: Substring.UTF8View {
            string.utf8.dropFirst(schemeLength + 3).prefix {
                $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#")
            }
        }
    }

    /// A string kept as text when it is plain, parsed at once otherwise; `nil` when
    /// `URL(string:)` refuses it.
    init?(string: String) {
        if let schemeLength = Self.plainSchemeLength(string) {
            self = .text(Text(string, schemeLength: schemeLength))
        } else if let url = URL(string: string) {
            self = .parsed(url)
        } else {
            return nil
        }
    }

    var url: URL {
        switch self {
        case .parsed(let url): url
        case .text(let text): text.url
        }
    }

    /// The string handed to libcurl: the absolute URL.
    var absoluteString: String {
        switch self {
        case .parsed(let url): url.absoluteString
        case .text(let text): text.string
        }
    }

    /// The scheme as written (not lowercased), or `nil` for none.
    var scheme: String? {
        switch self {
        case .parsed(let url): url.scheme
        case .text(let text): String(text.string.utf8.prefix(text.schemeLength))
        }
    }

    /// Whether the URL is relative to a base URL (a string kept as text never is).
    var hasBase: Bool {
        switch self {
        case .parsed(let url): url.baseURL != nil
        case .text: false
        }
    }

    /// What tells URLs apart: the string as written and the base URL (as `URL`'s own `==`).
    private var identity: (String, URL?) {
        switch self {
        case .parsed(let url): (url.relativeString, url.baseURL)
        case .text(let text): (text.string, nil)
        }
    }

    static func == (lhs: LazyURL, rhs: LazyURL) -> Bool {
        if case .text(let l) = lhs, case .text(let r) = rhs { return l === r || l.string == r.string }
        return lhs.identity == rhs.identity
    }

    func hash(into hasher: inout Hasher) {
        let (string, base) = identity
        hasher.combine(string)
        hasher.combine(base)
    }
}

extension LazyURL {
    /// Whether `string` is an absolute URL that `URL(string:)` takes exactly as it is: ASCII
    /// characters that need no percent-encoding, in the shape `scheme://host[:port]` followed
    /// by an optional path, query and fragment. A conservative test: a host with user info,
    /// an IPv6 literal or an escape, a `#` in the fragment, and anything else unusual are
    /// left to `URL(string:)`.
    static func isPlain(_ string: String) -> Bool { plainSchemeLength(string) != nil }

    /// The scheme's length when `string` is plain, else `nil`.
    private static func plainSchemeLength(_ string: String) -> Int? {
        var string = string
        return string.withUTF8 { bytes -> Int? in
            let count = bytes.count
            var i = 0
            // scheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ), then "://"
            guard count > 0, isLetter(bytes[0]) else { return nil }
            i = 1
            while i < count, isSchemeCharacter(bytes[i]) { i += 1 }
            let schemeLength = i
            guard count - i >= 3, bytes[i] == UInt8(ascii: ":"), bytes[i + 1] == UInt8(ascii: "/"),
                  bytes[i + 2] == UInt8(ascii: "/") else { return nil }
            i += 3
            // host: one or more unreserved characters; port: one to five digits
            let hostStart = i
            while i < count, isUnreserved(bytes[i]) { i += 1 }
            guard i > hostStart else { return nil }
            if i < count, bytes[i] == UInt8(ascii: ":") {
                i += 1
                let portStart = i
                while i < count, isDigit(bytes[i]) { i += 1 }
                guard (1...5).contains(i - portStart) else { return nil }
            }
            guard i == count || bytes[i] == UInt8(ascii: "/") || bytes[i] == UInt8(ascii: "?")
                || bytes[i] == UInt8(ascii: "#") else { return nil }
            // path, query, fragment: pchar / "/" / "?", one "#" at most, escapes well formed
            var seenHash = false
            while i < count {
                let byte = bytes[i]
                if byte == UInt8(ascii: "%") {
                    guard count - i >= 3, isHexDigit(bytes[i + 1]), isHexDigit(bytes[i + 2]) else { return nil }
                    i += 3
                    continue
                }
                if byte == UInt8(ascii: "#") {
                    guard !seenHash else { return nil }
                    seenHash = true
                } else if !isUnreserved(byte) && !isSubDelimiter(byte) && byte != UInt8(ascii: ":")
                    && byte != UInt8(ascii: "@") && byte != UInt8(ascii: "/") && byte != UInt8(ascii: "?") {
                    return nil
                }
                i += 1
            }
            return schemeLength
        }
    }

    private static func isLetter(_ byte: UInt8) -> Bool { (byte | 0x20) >= UInt8(ascii: "a") && (byte | 0x20) <= UInt8(ascii: "z") }
    private static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
    private static func isHexDigit(_ byte: UInt8) -> Bool {
        isDigit(byte) || ((byte | 0x20) >= UInt8(ascii: "a") && (byte | 0x20) <= UInt8(ascii: "f"))
    }
    private static func isSchemeCharacter(_ byte: UInt8) -> Bool {
        isLetter(byte) || isDigit(byte) || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
    }
    /// RFC 3986 unreserved: ALPHA / DIGIT / "-" / "." / "_" / "~"
    private static func isUnreserved(_ byte: UInt8) -> Bool {
        isLetter(byte) || isDigit(byte) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
            || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "~")
    }
    /// RFC 3986 sub-delims: "!" / "$" / "&" / "'" / "(" / ")" / "*" / "+" / "," / ";" / "="
    private static func isSubDelimiter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("),
             UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"),
             UInt8(ascii: "="):
            true
        default:
            false
        }
    }
}
