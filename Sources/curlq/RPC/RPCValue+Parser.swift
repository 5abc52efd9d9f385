import Foundation

/// Why a request body is not JSON the endpoint takes.
struct RPCParseError: Error, Sendable, Equatable {
    var message: String
}

extension RPCValue {
    /// Limits on what ``parse(_:limits:)`` reads: bounded nesting keeps its recursion (and a
    /// reply's) off the end of the stack.
    struct ParseLimits: Sendable {
        /// Arrays and objects inside one another, the outermost counted.
        var maxDepth = 32
    }

    /// Parses one JSON document (RFC 8259: any value at the top, space around it). Throws
    /// ``RPCParseError`` for anything else: never traps, and its work is linear in the input.
    static func parse(_ bytes: [UInt8], limits: ParseLimits = .init()) throws(RPCParseError) -> RPCValue {
        var parser = Parser(bytes: bytes, maxDepth: limits.maxDepth)
        parser.skipSpace()
        let value = try parser.value(depth: 0)
        parser.skipSpace()
        guard parser.index == bytes.count else { throw parser.error("text after the JSON value") }
        return value
    }

    private struct Parser {
        let bytes: [UInt8]
        let maxDepth: Int
        var index = 0

        init(bytes: [UInt8], maxDepth: Int) {
            self.bytes = bytes
            self.maxDepth = maxDepth
        }

        func error(_ message: String) -> RPCParseError { RPCParseError(message: "\(message) at byte \(index)") }

        mutating func skipSpace() {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        }

        mutating func value(depth: Int) throws(RPCParseError) -> RPCValue {
            guard index < bytes.count else { throw error("unexpected end") }
            switch bytes[index] {
            case UInt8(ascii: "{"): return try object(depth: depth + 1)
            case UInt8(ascii: "["): return try array(depth: depth + 1)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): try literal("true"); return .bool(true)
            case UInt8(ascii: "f"): try literal("false"); return .bool(false)
            case UInt8(ascii: "n"): try literal("null"); return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
            default: throw error("unexpected character")
            }
        }

        mutating func literal(_ word: String) throws(RPCParseError) {
            for byte in word.utf8 {
                guard index < bytes.count, bytes[index] == byte else { throw error("bad literal") }
                index += 1
            }
        }

        mutating func object(depth: Int) throws(RPCParseError) -> RPCValue {
            guard depth <= maxDepth else { throw error("nested deeper than \(maxDepth)") }
            index += 1
            var members: [(String, RPCValue)] = []
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            }
            while true {
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a member name") }
                let name = try string()
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':'") }
                index += 1
                skipSpace()
                members.append((name, try value(depth: depth)))
                skipSpace()
                guard index < bytes.count else { throw error("unexpected end") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "}") { index += 1; return .object(members) }
                throw error("expected ',' or '}'")
            }
        }

        mutating func array(depth: Int) throws(RPCParseError) -> RPCValue {
            guard depth <= maxDepth else { throw error("nested deeper than \(maxDepth)") }
            index += 1
            var values: [RPCValue] = []
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(values)
            }
            while true {
                skipSpace()
                values.append(try value(depth: depth))
                skipSpace()
                guard index < bytes.count else { throw error("unexpected end") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(values) }
                throw error("expected ',' or ']'")
            }
        }

        mutating func number() throws(RPCParseError) -> String {
            let start = index
            if bytes[index] == UInt8(ascii: "-") { index += 1 }
            func digits(_ parser: inout Parser) -> Int {
                let from = parser.index
                while parser.index < parser.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(parser.bytes[parser.index]) {
                    parser.index += 1
                }
                return parser.index - from
            }
            guard index < bytes.count else { throw error("bad number") }
            if bytes[index] == UInt8(ascii: "0") {
                index += 1
            } else if digits(&self) == 0 {
                throw error("bad number")
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                index += 1
                guard digits(&self) > 0 else { throw error("bad number") }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
                guard digits(&self) > 0 else { throw error("bad number") }
            }
            return String(decoding: bytes[start..<index], as: UTF8.self)
        }

        mutating func hex4() throws(RPCParseError) -> UInt32 {
            guard index + 4 <= bytes.count else { throw error("bad \\u escape") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                let digit: UInt32
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
                default: throw error("bad \\u escape")
                }
                value = value << 4 | digit
                index += 1
            }
            return value
        }

        /// A string, from its opening quote; its bytes must be UTF-8.
        mutating func string() throws(RPCParseError) -> String {
            index += 1
            var out = [UInt8]()
            while true {
                guard index < bytes.count else { throw error("unterminated string") }
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    index += 1
                    break
                }
                if byte < 0x20 { throw error("control character in a string") }
                if byte != UInt8(ascii: "\\") {
                    out.append(byte)
                    index += 1
                    continue
                }
                index += 1
                guard index < bytes.count else { throw error("unterminated string") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                            throw error("lone surrogate")
                        }
                        index += 2
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw error("lone surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw error("lone surrogate")
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw error("bad \\u escape") }
                    out.append(contentsOf: Array(String(Character(unicode)).utf8))
                default: throw error("bad escape")
                }
            }
            guard let text = String(validating: out, as: UTF8.self) else { throw error("a string that is not UTF-8") }
            return text
        }
    }
}
