@testable import CurlQueue
import HTTPTypes

/// A response head as libcurl's header callback delivers it to `Transfer.didReceiveHeaderLine`:
/// the input is split at each LF into lines, each handed over on its own, ending in CRLF (a CR
/// before the LF is part of the line ending, other CRs stay), and a blank line follows the last.
/// The first line is the status line; 1xx and redirect heads may follow one another.
///
/// Each line is copied into an allocation of exactly its size, so AddressSanitizer sees any read
/// past its end, as a read past libcurl's buffer would be.
///
/// Checked after every line: the parser agrees with `ReferenceHead`, a slow and plain model of
/// the documented behaviour built on swift-http-types' public API, on status, version and
/// completeness; at the end, on the fields too. And, whatever the model says: a status is
/// 100...999, a version has one digit each side, fields come only after a status line, a head
/// is complete after the blank line, names are tokens and values legal field values (no CR, LF,
/// NUL or other control byte but HTAB, no space or tab at either end).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzResponseHead(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = UnsafeBufferPointer(start: data, count: size)
    var parser = ResponseHeadParser()
    var model = ReferenceHead()
    var lineStart = 0
    var lineNumber = 0
    while lineStart < input.count || lineNumber == 0 {
        let lineEnd = input[lineStart...].firstIndex(of: 0x0A) ?? input.count
        var content = input[lineStart..<lineEnd]
        if content.last == 0x0D { content = content.dropLast() }
        lineNumber += 1
        deliver(content, to: &parser, model: &model, lineNumber: lineNumber)
        lineStart = lineEnd + 1
    }
    deliver(input[0..<0], to: &parser, model: &model, lineNumber: lineNumber + 1)

    if parser.status != nil {
        check(parser.isComplete, "a head with a status is not complete after the blank line")
    }
    checkFieldsMatch(parser, model)
    for field in parser.fields {
        let name = Array(field.name.rawName.utf8)
        check(!name.isEmpty && name.allSatisfy(ReferenceHead.isTokenByte), "field name \(field.name.rawName.debugDescription) is not a token")
        check(field.name.canonicalName == field.name.rawName.lowercased(), "canonical name of \(field.name.rawName.debugDescription) is \(field.name.canonicalName.debugDescription)")
        let value = field.withUnsafeBytesOfValue { Array($0) }
        check(isLegalFieldValue(value), "\(field.name): value \(value) is not a legal field value")
    }
    return 0
}

/// Hands `content` and CRLF to the parser as one line of its own allocation, and to the model.
private func deliver(
    _ content: Slice<UnsafeBufferPointer<UInt8>>, to parser: inout ResponseHeadParser,
    model: inout ReferenceHead, lineNumber: Int
) {
    let line = UnsafeMutableRawBufferPointer.allocate(byteCount: content.count + 2, alignment: 1)
    defer { line.deallocate() }
    line.copyBytes(from: content)
    line[content.count] = 0x0D
    line[content.count + 1] = 0x0A
    parser.consume(UnsafeRawBufferPointer(line))
    model.consume(content)

    if let status = parser.status {
        check((100...999).contains(status), "line \(lineNumber): status \(status)")
        check((0...9).contains(parser.version.major) && (0...9).contains(parser.version.minor),
              "line \(lineNumber): version \(parser.version)")
    } else {
        check(parser.fields.isEmpty, "line \(lineNumber): fields before any status line")
    }
    check(parser.status == model.status, "line \(lineNumber): status \(String(describing: parser.status)), expected \(String(describing: model.status))")
    check(parser.version == model.version, "line \(lineNumber): version \(parser.version), expected \(model.version)")
    check(parser.isComplete == model.isComplete, "line \(lineNumber): isComplete \(parser.isComplete), expected \(model.isComplete)")
}

private func checkFieldsMatch(_ parser: ResponseHeadParser, _ model: ReferenceHead) {
    let actual = parser.fields.map { ($0.name.rawName, $0.withUnsafeBytesOfValue { Array($0) }) }
    let expected = model.fields.map { ($0.name.rawName, $0.withUnsafeBytesOfValue { Array($0) }) }
    check(actual.elementsEqual(expected) { $0.0 == $1.0 && $0.1 == $1.1 }, "fields \(actual), expected \(expected)")
}

/// RFC 9110 field-value, as swift-http-types keeps one: visible ASCII, obs-text, spaces and
/// tabs, but no space or tab at either end.
private func isLegalFieldValue(_ value: [UInt8]) -> Bool {
    if let first = value.first, first == 0x20 || first == 0x09 { return false }
    if let last = value.last, last == 0x20 || last == 0x09 { return false }
    return value.allSatisfy { $0 == 0x09 || $0 == 0x20 || (0x21...0x7E).contains($0) || $0 >= 0x80 }
}

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("ResponseHeadParser: \(message())") }
}

/// What `ResponseHeadParser` is documented to do, written plainly: the head of the last status
/// line, its fields the lines `name: value` with a token for a name, the value without the
/// spaces and tabs around it as `HTTPField(name:value:)` keeps its bytes.
private struct ReferenceHead {
    var status: Int?
    var version = HTTPVersion.http1_1
    var fields: [HTTPField] = []
    var isComplete = false

    mutating func consume(_ content: Slice<UnsafeBufferPointer<UInt8>>) {
        var line = Array(content)
        while line.last == 0x0D { line.removeLast() }
        if line.starts(with: "HTTP/".utf8) {
            if let (version, status) = Self.statusLine(line) {
                (self.version, self.status, fields, isComplete) = (version, status, [], false)
            }
            return
        }
        if line.isEmpty {
            if status != nil { isComplete = true }
            return
        }
        guard status != nil, !isComplete,
              let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > 0,
              line[..<colon].allSatisfy(Self.isTokenByte) else { return }
        guard let name = HTTPField.Name(String(decoding: line[..<colon], as: UTF8.self)) else {
            fatalError("HTTPField.Name rejects the token \(line[..<colon])")
        }
        var value = line[(colon + 1)...]
        while let first = value.first, first == 0x20 || first == 0x09 { value.removeFirst() }
        while let last = value.last, last == 0x20 || last == 0x09 { value.removeLast() }
        fields.append(HTTPField(name: name, value: Array(value)))
    }

    /// `HTTP/1.1 200 OK`, `HTTP/2 404`: one digit, maybe `.` and one digit, spaces, three
    /// digits (100 to 999), then the end of the line or a space.
    static func statusLine(_ line: [UInt8]) -> (HTTPVersion, Int)? {
        func digit(_ index: Int) -> Int? {
            index < line.count && (0x30...0x39).contains(line[index]) ? Int(line[index] - 0x30) : nil
        }
        var index = 5
        guard let major = digit(index) else { return nil }
        index += 1
        var minor = 0
        if index < line.count, line[index] == UInt8(ascii: ".") {
            guard let digit = digit(index + 1) else { return nil }
            minor = digit
            index += 2
        }
        guard index < line.count, line[index] == 0x20 else { return nil }
        while index < line.count, line[index] == 0x20 { index += 1 }
        guard let hundreds = digit(index), let tens = digit(index + 1), let ones = digit(index + 2),
              hundreds > 0 else { return nil }
        index += 3
        guard index == line.count || line[index] == 0x20 else { return nil }
        return (HTTPVersion(major: major, minor: minor), hundreds * 100 + tens * 10 + ones)
    }

    /// RFC 9110 tchar.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default:
            "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}
