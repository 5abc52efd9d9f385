import CurlQueue
import Foundation

extension JSONValue {
    /// A single pass over a JSON document's bytes (RFC 8259), for ``JSONValue/init(parsing:)``.
    ///
    /// `JSONDecoder` can only reach a `JSONValue` by trying each type in turn, and every failed
    /// try builds an error carrying the whole coding path: a body of a few kilobytes, nested
    /// deep with many small values, took seconds to minutes of CPU. This reads each byte once,
    /// decides a value's type by its first byte, and fails at the first byte that is not JSON,
    /// saying where. Nesting is bounded by ``JSONValue/maxDepth``.
    struct Parser {
        private let bytes: [UInt8]
        private var index = 0
        private var depth = 0

        struct Failure: Error {
            var message: String
        }

        init(_ data: Data) {
            bytes = [UInt8](data)
            // A UTF-8 byte order mark first is skipped, as RFC 8259 §8.1 allows and JSONDecoder
            // does: a body that decodes must not fail validation.
            if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { index = 3 }
        }

        /// The document's one value, with nothing but whitespace after it.
        mutating func document() throws(Failure) -> JSONValue {
            let result = try value()
            skipWhitespace()
            guard index == bytes.count else { throw failure("unexpected \(describe(bytes[index])) after the value") }
            return result
        }

        private mutating func value() throws(Failure) -> JSONValue {
            skipWhitespace()
            guard index < bytes.count else { throw failure("the document ends where a value should be") }
            switch bytes[index] {
            case UInt8(ascii: "{"): return try object()
            case UInt8(ascii: "["): return try array()
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): try literal("true"); return .bool(true)
            case UInt8(ascii: "f"): try literal("false"); return .bool(false)
            case UInt8(ascii: "n"): try literal("null"); return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
            case let byte: throw failure("unexpected \(describe(byte)) where a value should be")
            }
        }

        private mutating func object() throws(Failure) -> JSONValue {
            try enter()
            var members: [String: JSONValue] = [:]
            skipWhitespace()
            if close(UInt8(ascii: "}")) { return .object(members) }
            while true {
                skipWhitespace()
                guard peek(UInt8(ascii: "\"")) else { throw failure("an object's key must be a string") }
                let key = try string()
                skipWhitespace()
                guard peek(UInt8(ascii: ":")) else { throw failure("expected ':' after an object's key") }
                index += 1
                let member = try value()
                if members[key] == nil { members[key] = member }  // the first of a repeated key, as JSONDecoder
                skipWhitespace()
                if close(UInt8(ascii: "}")) { return .object(members) }
                guard peek(UInt8(ascii: ",")) else { throw failure("expected ',' or '}' in an object") }
                index += 1
            }
        }

        private mutating func array() throws(Failure) -> JSONValue {
            try enter()
            var elements: [JSONValue] = []
            skipWhitespace()
            if close(UInt8(ascii: "]")) { return .array(elements) }
            while true {
                elements.append(try value())
                skipWhitespace()
                if close(UInt8(ascii: "]")) { return .array(elements) }
                guard peek(UInt8(ascii: ",")) else { throw failure("expected ',' or ']' in an array") }
                index += 1
            }
        }

        /// Takes the opening `[` or `{` of a container, one level deeper.
        private mutating func enter() throws(Failure) {
            depth += 1
            if depth > JSONValue.maxDepth { throw failure("nested deeper than \(JSONValue.maxDepth) levels") }
            index += 1
        }

        /// Takes `closing` and leaves the container, if it is the next byte.
        private mutating func close(_ closing: UInt8) -> Bool {
            guard peek(closing) else { return false }
            index += 1
            depth -= 1
            return true
        }

        /// A string, from its opening quote: escapes resolved, UTF-8 checked.
        private mutating func string() throws(Failure) -> String {
            index += 1  // "
            var utf8: [UInt8] = []
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    guard let text = String(validating: utf8, as: UTF8.self) else {
                        throw failure("a string is not valid UTF-8")
                    }
                    return text
                case UInt8(ascii: "\\"):
                    try escape(into: &utf8)
                case 0..<0x20:
                    index -= 1
                    throw failure("a control character inside a string must be escaped")
                default:
                    utf8.append(byte)
                }
            }
            throw failure("a string is not closed")
        }

        private mutating func escape(into utf8: inout [UInt8]) throws(Failure) {
            guard index < bytes.count else { throw failure("a string is not closed") }
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(byte)
            case UInt8(ascii: "b"): utf8.append(0x08)
            case UInt8(ascii: "f"): utf8.append(0x0C)
            case UInt8(ascii: "n"): utf8.append(0x0A)
            case UInt8(ascii: "r"): utf8.append(0x0D)
            case UInt8(ascii: "t"): utf8.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hexQuad()
                if (0xD800...0xDBFF).contains(scalar) {
                    // A high surrogate must be followed by an escaped low one.
                    guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                        throw failure("a lone surrogate in a string")
                    }
                    index += 2
                    let low = try hexQuad()
                    guard (0xDC00...0xDFFF).contains(low) else { throw failure("a lone surrogate in a string") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(scalar) {
                    throw failure("a lone surrogate in a string")
                }
                utf8.append(contentsOf: String(Character(Unicode.Scalar(scalar)!)).utf8)
            default:
                index -= 1
                throw failure("unknown escape \\\(describe(byte)) in a string")
            }
        }

        private mutating func hexQuad() throws(Failure) -> UInt32 {
            guard index + 4 <= bytes.count else { throw failure("a \\u escape needs four hex digits") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: throw failure("a \\u escape needs four hex digits")
                }
                value = value << 4 | UInt32(digit)
                index += 1
            }
            return value
        }

        /// A number as JSON writes it: `-`? (`0` | [1-9] digits) (`.` digits)? ([eE] [+-]? digits)?.
        /// One too large for a `Double` is infinite, as `Double("1e400")` makes it.
        private mutating func number() throws(Failure) -> Double {
            let start = index
            if peek(UInt8(ascii: "-")) { index += 1 }
            guard digit() else { throw failure("a number needs a digit") }
            if bytes[index] == UInt8(ascii: "0") {
                index += 1
            } else {
                while digit() { index += 1 }
            }
            if peek(UInt8(ascii: ".")) {
                index += 1
                guard digit() else { throw failure("a number needs a digit after '.'") }
                while digit() { index += 1 }
            }
            if peek(UInt8(ascii: "e")) || peek(UInt8(ascii: "E")) {
                index += 1
                if peek(UInt8(ascii: "+")) || peek(UInt8(ascii: "-")) { index += 1 }
                guard digit() else { throw failure("a number needs a digit in its exponent") }
                while digit() { index += 1 }
            }
            let text = String(decoding: bytes[start..<index], as: UTF8.self)
            guard let number = Double(text) else { throw failure("not a number: \(text)") }
            return number
        }

        private mutating func literal(_ word: String) throws(Failure) {
            let count = word.utf8.count
            guard index + count <= bytes.count, bytes[index..<index + count].elementsEqual(word.utf8) else {
                throw failure("unexpected \(describe(bytes[index])) where a value should be")
            }
            index += count
        }

        private func digit() -> Bool {
            index < bytes.count && (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index])
        }

        private func peek(_ byte: UInt8) -> Bool {
            index < bytes.count && bytes[index] == byte
        }

        private mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        private func describe(_ byte: UInt8) -> String {
            (0x21...0x7E).contains(byte) ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x\(String(byte, radix: 16))"
        }

        private func failure(_ message: String) -> Failure {
            Failure(message: "\(message) (at byte \(index))")
        }
    }
}
