import HTTPTypes

/// Builds the head of the final response from the header lines libcurl hands over one at a
/// time: status lines, field lines and the blank line that ends each head. Informational (1xx)
/// heads and the heads of followed redirects are replaced by the next status line.
///
/// Pure Swift with no libcurl in it, so it can be fuzzed and tested on its own. Lines that are
/// not valid (a bad field name, no colon) are skipped, never fatal.
struct ResponseHeadParser {
    private(set) var status: Int?
    private(set) var version = HTTPVersion.http1_1
    private(set) var fields = HTTPFields()
    /// True once the blank line after the current head arrived.
    private(set) var isComplete = false

    /// Feeds one line, with or without its trailing CRLF.
    mutating func consume(_ line: UnsafeRawBufferPointer) {
        var end = line.count
        while end > 0, line[end - 1] == 0x0A || line[end - 1] == 0x0D { end -= 1 }
        let bytes = UnsafeRawBufferPointer(rebasing: line[0..<end])

        if bytes.starts(with: Self.httpPrefix) {
            if let (version, status) = Self.parseStatusLine(bytes) {
                self.version = version
                self.status = status
                self.fields = HTTPFields()
                self.isComplete = false
            }
            return
        }
        if bytes.isEmpty {
            if status != nil { isComplete = true }
            return
        }
        // Trailers after a complete head, and field lines before any status line, are ignored.
        guard status != nil, !isComplete else { return }
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon > 0 else { return }
        guard let nameString = String(validating: bytes[..<colon], as: UTF8.self),
              let name = HTTPField.Name(nameString) else { return }
        var start = colon + 1
        var stop = bytes.count
        while start < stop, bytes[start] == 0x20 || bytes[start] == 0x09 { start += 1 }
        while stop > start, bytes[stop - 1] == 0x20 || bytes[stop - 1] == 0x09 { stop -= 1 }
        fields.append(HTTPField(name: name, value: bytes[start..<stop]))
    }

    private static let httpPrefix: [UInt8] = Array("HTTP/".utf8)

    /// Parses `HTTP/1.1 200 OK` or `HTTP/2 200`; nil when it is not a status line.
    static func parseStatusLine(_ line: UnsafeRawBufferPointer) -> (HTTPVersion, Int)? {
        var index = httpPrefix.count
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
}
