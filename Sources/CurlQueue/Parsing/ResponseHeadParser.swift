import HTTPTypes

/// Builds the head of the final response from the header lines libcurl hands over one at a
/// time: status lines, field lines and the blank line that ends each head. Informational (1xx)
/// heads and the heads of followed redirects are replaced by the next status line.
///
/// Pure Swift with no libcurl in it, so it can be fuzzed and tested on its own. Lines that are
/// not valid (a bad field name, no colon) are skipped, never fatal.
///
/// The status line is parsed as it arrives; field lines are only kept, as bytes, and parsed
/// when ``fields`` is read — most responses' fields are never looked at by the engine, and a
/// ``Response`` parses them on its first read of `headerFields` (``FieldLines``).
struct ResponseHeadParser {
    private(set) var status: Int?
    private(set) var version = HTTPVersion.http1_1
    /// The field lines of the current head, without line endings, each after its length in
    /// three bytes, big-endian (see ``maxLineLength``).
    private(set) var fieldLines: [UInt8] = []
    /// True once the blank line after the current head arrived.
    private(set) var isComplete = false
    /// The current head's `Content-Length` as a number, read as its line arrives: what
    /// `Int64(fields[.contentLength])` gives, nil without that field, with two of them (their
    /// values joined by a comma) or with a value that is not a number.
    private(set) var contentLength: Int64?
    /// How many `Content-Length` lines the current head has had.
    private var contentLengthLines = 0

    /// The fields of the current head, in order; lines that are not valid fields are skipped.
    /// Parsed anew at each read.
    var fields: HTTPFields { Self.parseFields(fieldLines) }

    /// Feeds one line, with or without its trailing CRLF. Returns true when the line
    /// completed a head (the blank line after a status line's fields).
    @discardableResult
    mutating func consume(_ line: UnsafeRawBufferPointer) -> Bool {
        var end = line.count
        while end > 0, line[end - 1] == 0x0A || line[end - 1] == 0x0D { end -= 1 }
        let bytes = UnsafeRawBufferPointer(rebasing: line[0..<end])

        if Self.startsWithHTTPPrefix(bytes) {
            if let (version, status) = Self.parseStatusLine(bytes) {
                self.version = version
                self.status = status
                self.fieldLines.removeAll(keepingCapacity: true)
                self.isComplete = false
                self.contentLength = nil
                self.contentLengthLines = 0
            }
            return false
        }
        if bytes.isEmpty {
            guard status != nil, !isComplete else { return false }
            isComplete = true
            return true
        }
        // Trailers after a complete head, and field lines before any status line, are ignored.
        guard status != nil, !isComplete else { return false }
        if fieldLines.isEmpty { fieldLines.reserveCapacity(Self.expectedFieldBytes) }
        let line = bytes.count <= Self.maxLineLength ? bytes : UnsafeRawBufferPointer(rebasing: bytes[..<Self.maxLineLength])
        if line.count > Self.contentLengthNameLength, line[0] | 0x20 == UInt8(ascii: "c") { noteContentLength(line) }
        fieldLines.append(UInt8(truncatingIfNeeded: line.count >> 16))
        fieldLines.append(UInt8(truncatingIfNeeded: line.count >> 8))
        fieldLines.append(UInt8(truncatingIfNeeded: line.count))
        fieldLines.append(contentsOf: line)
        return false
    }

    /// The length of `content-length`.
    private static let contentLengthNameLength = 14

    /// Whether `line` starts with `content-length:`, the name in any case: two overlapping
    /// words of eight bytes, the letters' case bit set (a letter only matches itself in either
    /// case; any other byte set so matches no letter).
    private static func startsWithContentLengthName(_ line: UnsafeRawBufferPointer) -> Bool {
        guard line.count > contentLengthNameLength, let base = line.baseAddress,
              line[contentLengthNameLength] == UInt8(ascii: ":") else { return false }
        // Little-endian: "content-" and "t-length", with 0x20 on each letter's byte.
        let first = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
        let second = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: 6, as: UInt64.self))
        return first | 0x0020_2020_2020_2020 == 0x2D74_6E65_746E_6F63
            && second | 0x2020_2020_2020_0020 == 0x6874_676E_656C_2D74
    }

    /// Reads `line` as the `Content-Length` field when it is one (its name in any case, before
    /// the colon), as ``parseFieldLine(_:)`` and `HTTPFields` would: the value without spaces
    /// or tabs around it, as `Int64` parses text.
    private mutating func noteContentLength(_ line: UnsafeRawBufferPointer) {
        guard Self.startsWithContentLengthName(line) else { return }
        contentLengthLines += 1
        guard contentLengthLines == 1 else {
            contentLength = nil  // joined with a comma, the values are no number
            return
        }
        var start = Self.contentLengthNameLength + 1
        var stop = line.count
        while start < stop, FieldBytes.isWhitespace(line[start]) { start += 1 }
        while stop > start, FieldBytes.isWhitespace(line[stop - 1]) { stop -= 1 }
        contentLength = Int64(String(decoding: UnsafeRawBufferPointer(rebasing: line[start..<stop]), as: UTF8.self))
    }

    /// Room made for the field lines of a head at its first line: enough for most servers'
    /// heads, so that one allocation holds them.
    private static let expectedFieldBytes = 512
    /// The longest field line kept (longer ones are cut): what three bytes of length can say,
    /// 16 MiB, far above the 300 KiB libcurl allows a whole head.
    static let maxLineLength = 0xFF_FFFF

    /// Room made for the fields of a head: enough for most servers' heads, so that one
    /// allocation holds them.
    private static let expectedFieldCount = 16

    /// Parses field lines as kept in ``fieldLines``.
    static func parseFields(_ lines: [UInt8]) -> HTTPFields {
        var fields = HTTPFields()
        guard !lines.isEmpty else { return fields }
        fields.reserveCapacity(expectedFieldCount)
        lines.withUnsafeBytes { bytes in
            var start = 0
            while start + 3 <= bytes.count {
                let length = Int(bytes[start]) << 16 | Int(bytes[start + 1]) << 8 | Int(bytes[start + 2])
                let end = min(start + 3 + length, bytes.count)
                if let field = parseFieldLine(UnsafeRawBufferPointer(rebasing: bytes[(start + 3)..<end])) {
                    fields.append(field)
                }
                start = end
            }
        }
        return fields
    }

    /// The length of `HTTP/`, where the version of a status line starts.
    private static let httpPrefixLength = 5

    /// Whether `line` starts with `HTTP/`, which makes it a status line or nothing.
    private static func startsWithHTTPPrefix(_ line: UnsafeRawBufferPointer) -> Bool {
        line.count >= httpPrefixLength
            && line[0] == UInt8(ascii: "H") && line[1] == UInt8(ascii: "T") && line[2] == UInt8(ascii: "T")
            && line[3] == UInt8(ascii: "P") && line[4] == UInt8(ascii: "/")
    }

    /// Parses `HTTP/1.1 200 OK` or `HTTP/2 200`; nil when it is not a status line.
    static func parseStatusLine(_ line: UnsafeRawBufferPointer) -> (HTTPVersion, Int)? {
        var index = httpPrefixLength
        func number(maxDigits: Int) -> Int? {
            var value = 0
            var digits = 0
            while index < line.count, digits < maxDigits, (0x30...0x39).contains(line[index]) {
                value = value * 10 + Int(line[index] - 0x30)
                index += 1
                digits += 1
            }
            return digits == 0 ? nil : value
        }
        guard let major = number(maxDigits: 1) else { return nil }
        var minor = 0
        if index < line.count, line[index] == UInt8(ascii: ".") {
            index += 1
            guard let value = number(maxDigits: 1) else { return nil }
            minor = value
        }
        guard index < line.count, line[index] == 0x20 else { return nil }
        while index < line.count, line[index] == 0x20 { index += 1 }
        let codeStart = index
        guard let code = number(maxDigits: 3), index - codeStart == 3, (100...999).contains(code) else {
            return nil
        }
        guard index == line.count || line[index] == 0x20 else { return nil }
        return (HTTPVersion(major: major, minor: minor), code)
    }

    /// Parses one field line, `name: value`, without its line ending.
    ///
    /// The name is everything before the first colon and must be a non-empty RFC 9110 token; the
    /// value is the rest with its leading and trailing spaces and tabs removed. Returns nil when
    /// there is no colon or the name is not a token, so the caller skips the line.
    ///
    /// The field is the one `HTTPField(name:value:)` builds from the value's bytes: control bytes
    /// (CR, LF, NUL and the rest) become spaces, or go when they lead or trail, and bytes above
    /// 0x7F (obs-text) are kept as they are.
    ///
    /// Printable ASCII, the usual case, is read straight from the buffer: common names are
    /// constants and the value becomes a `String` with nothing to repair. Only a value with other
    /// bytes takes the generic byte path of swift-http-types.
    static func parseFieldLine(_ bytes: UnsafeRawBufferPointer) -> HTTPField? {
        guard let colon = FieldBytes.firstColon(in: bytes), colon > 0 else { return nil }
        let nameBytes = UnsafeRawBufferPointer(rebasing: bytes[..<colon])
        let name: HTTPField.Name
        if let common = FieldBytes.commonName(nameBytes) {
            name = common
        } else {
            // Decoding cannot let a bad name through: any byte that is not a token byte, including
            // each byte of invalid UTF-8, leaves a character that `init?(_:)` rejects.
            guard let checked = HTTPField.Name(String(decoding: nameBytes, as: UTF8.self)) else { return nil }
            name = checked
        }

        var start = colon + 1
        var stop = bytes.count
        while start < stop, FieldBytes.isWhitespace(bytes[start]) { start += 1 }
        while stop > start, FieldBytes.isWhitespace(bytes[stop - 1]) { stop -= 1 }
        let value = UnsafeRawBufferPointer(rebasing: bytes[start..<stop])
        if FieldBytes.isPrintableASCII(value) {
            return HTTPField(name: name, value: String(decoding: value, as: UTF8.self))
        }
        return HTTPField(name: name, value: value)
    }
}
