import HTTPTypes

/// Byte classes of RFC 9110 field lines, and the field names servers send most, for parsing a
/// response head straight from libcurl's buffer.
enum FieldBytes {
    /// The index of the first colon in `bytes`, nil when there is none.
    static func firstColon(in bytes: UnsafeRawBufferPointer) -> Int? {
        var index = 0
        if let base = bytes.baseAddress {
            // Eight bytes at a time: a byte of `word ^ colons` is zero where `word` has a colon,
            // and the lowest flag of the zero-byte test below marks the first of them exactly.
            let colons: UInt64 = 0x3A3A_3A3A_3A3A_3A3A
            while bytes.count - index >= 8 {
                let word = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: index, as: UInt64.self)) ^ colons
                let zeroBytes = (word &- 0x0101_0101_0101_0101) & ~word & 0x8080_8080_8080_8080
                if zeroBytes != 0 { return index + zeroBytes.trailingZeroBitCount / 8 }
                index += 8
            }
        }
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: ":") { return index }
            index += 1
        }
        return nil
    }

    /// Whether `byte` is optional whitespace (OWS): a space or a horizontal tab.
    @inline(__always)
    static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09
    }

    /// Whether every byte is visible ASCII (0x21–0x7E), a space or a horizontal tab: the field
    /// values that are valid UTF-8 and that `HTTPField` keeps unchanged, once the value has no
    /// whitespace at either end.
    static func isPrintableASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress, bytes.count >= 8 else {
            return bytes.allSatisfy(isPrintableASCII)
        }
        // Eight bytes at a time, the last word overlapping the one before it. A word with
        // anything but 0x20–0x7E in it, a tab for one, sends the value to the byte loop.
        let last = bytes.count - 8
        var index = 0
        while true {
            let word = base.loadUnaligned(fromByteOffset: min(index, last), as: UInt64.self)
            guard isSpaceToTilde(word) else { return bytes.allSatisfy(isPrintableASCII) }
            if index >= last { return true }
            index += 8
        }
    }

    /// Whether `byte` is visible ASCII, a space or a horizontal tab.
    @inline(__always)
    private static func isPrintableASCII(_ byte: UInt8) -> Bool {
        byte &- 0x20 <= 0x5E || byte == 0x09
    }

    /// Whether all eight bytes of `word` are 0x20–0x7E, whatever their order in memory.
    @inline(__always)
    private static func isSpaceToTilde(_ word: UInt64) -> Bool {
        let highBits: UInt64 = 0x8080_8080_8080_8080
        // With no high bit set, setting each before subtracting 0x20 borrows across no byte, and
        // adding 1 carries across none: each high bit then tells a byte >= 0x20 or == 0x7F.
        return word & highBits == 0
            && ((word | highBits) &- 0x2020_2020_2020_2020) & highBits == highBits
            && (word &+ 0x0101_0101_0101_0101) & highBits == 0
    }

    /// The name for `bytes` when they spell one of the field names servers send most, either in
    /// the case of swift-http-types' constant for it (`Content-Type`, `ETag`) or in lowercase, as
    /// HTTP/2 and HTTP/3 carry names; nil for any other bytes, other cases included.
    ///
    /// A name it returns is equal to `HTTPField.Name(String(decoding: bytes, as: UTF8.self))` in
    /// both `rawName` and `canonicalName`, but costs no validation, lowercasing or allocation.
    static func commonName(_ bytes: UnsafeRawBufferPointer) -> HTTPField.Name? {
        switch bytes.count {
        case 3:
            name(bytes, "Age", .age, lowercase: Lowercase.age)
                ?? name(bytes, "Via", .via, lowercase: Lowercase.via)
        case 4:
            name(bytes, "Date", .date, lowercase: Lowercase.date)
                ?? name(bytes, "ETag", .eTag, lowercase: Lowercase.eTag)
                ?? name(bytes, "Vary", .vary, lowercase: Lowercase.vary)
        case 5:
            name(bytes, "Allow", .allow, lowercase: Lowercase.allow)
        case 6:
            name(bytes, "Server", .server, lowercase: Lowercase.server)
        case 7:
            name(bytes, "Expires", .expires, lowercase: Lowercase.expires)
        case 8:
            name(bytes, "Location", .location, lowercase: Lowercase.location)
        case 10:
            name(bytes, "Connection", .connection, lowercase: Lowercase.connection)
                ?? name(bytes, "Set-Cookie", .setCookie, lowercase: Lowercase.setCookie)
        case 11:
            name(bytes, "Retry-After", .retryAfter, lowercase: Lowercase.retryAfter)
        case 12:
            name(bytes, "Content-Type", .contentType, lowercase: Lowercase.contentType)
        case 13:
            name(bytes, "Last-Modified", .lastModified, lowercase: Lowercase.lastModified)
                ?? name(bytes, "Accept-Ranges", .acceptRanges, lowercase: Lowercase.acceptRanges)
                ?? name(bytes, "Cache-Control", .cacheControl, lowercase: Lowercase.cacheControl)
                ?? name(bytes, "Content-Range", .contentRange, lowercase: Lowercase.contentRange)
        case 14:
            name(bytes, "Content-Length", .contentLength, lowercase: Lowercase.contentLength)
        case 16:
            name(bytes, "Content-Encoding", .contentEncoding, lowercase: Lowercase.contentEncoding)
                ?? name(bytes, "WWW-Authenticate", .wwwAuthenticate, lowercase: Lowercase.wwwAuthenticate)
        case 17:
            name(bytes, "Transfer-Encoding", .transferEncoding, lowercase: Lowercase.transferEncoding)
        case 19:
            name(bytes, "Content-Disposition", .contentDisposition, lowercase: Lowercase.contentDisposition)
        case 25:
            name(bytes, "Strict-Transport-Security", .strictTransportSecurity, lowercase: Lowercase.strictTransportSecurity)
        default:
            nil
        }
    }

    /// `name` when `bytes` spell `literal`, `lowercase` when they spell it in lowercase, else nil.
    @inline(__always)
    private static func name(
        _ bytes: UnsafeRawBufferPointer, _ literal: StaticString, _ name: HTTPField.Name,
        lowercase: @autoclosure () -> HTTPField.Name
    ) -> HTTPField.Name? {
        guard literal.utf8CodeUnitCount == bytes.count else { return nil }
        let expected = UnsafeRawBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount)
        if spells(bytes, expected, lowercased: false) { return name }
        if spells(bytes, expected, lowercased: true) { return lowercase() }
        return nil
    }

    /// Whether `bytes` are `expected`, or `expected` in lowercase; both are as long.
    @inline(__always)
    private static func spells(
        _ bytes: UnsafeRawBufferPointer, _ expected: UnsafeRawBufferPointer, lowercased: Bool
    ) -> Bool {
        for index in 0..<bytes.count {
            let letter = expected[index]
            if bytes[index] != (lowercased ? asciiLowercase(letter) : letter) { return false }
        }
        return true
    }

    /// `byte` with an ASCII capital letter made lowercase.
    @inline(__always)
    private static func asciiLowercase(_ byte: UInt8) -> UInt8 {
        byte &- UInt8(ascii: "A") < 26 ? byte | 0x20 : byte
    }

    /// The lowercase names `commonName(_:)` returns, built once.
    private enum Lowercase {
        static let age = HTTPField.Name("age")!
        static let via = HTTPField.Name("via")!
        static let date = HTTPField.Name("date")!
        static let eTag = HTTPField.Name("etag")!
        static let vary = HTTPField.Name("vary")!
        static let allow = HTTPField.Name("allow")!
        static let server = HTTPField.Name("server")!
        static let expires = HTTPField.Name("expires")!
        static let location = HTTPField.Name("location")!
        static let connection = HTTPField.Name("connection")!
        static let setCookie = HTTPField.Name("set-cookie")!
        static let retryAfter = HTTPField.Name("retry-after")!
        static let contentType = HTTPField.Name("content-type")!
        static let lastModified = HTTPField.Name("last-modified")!
        static let acceptRanges = HTTPField.Name("accept-ranges")!
        static let cacheControl = HTTPField.Name("cache-control")!
        static let contentRange = HTTPField.Name("content-range")!
        static let contentLength = HTTPField.Name("content-length")!
        static let contentEncoding = HTTPField.Name("content-encoding")!
        static let wwwAuthenticate = HTTPField.Name("www-authenticate")!
        static let transferEncoding = HTTPField.Name("transfer-encoding")!
        static let contentDisposition = HTTPField.Name("content-disposition")!
        static let strictTransportSecurity = HTTPField.Name("strict-transport-security")!
    }
}
