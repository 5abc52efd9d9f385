public import Foundation

/// A JSON document as it is, with booleans kept apart from numbers.
///
/// Decoded with `JSONDecoder`, not `JSONSerialization`, which on Linux gives `true` and `1`
/// the same `NSNumber` and so cannot tell a boolean from a number.
public enum JSONValue: Hashable, Sendable, Decodable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number (as a `Double`: large integers lose precision, not their type).
    case number(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object; key order is not kept.
    case object([String: JSONValue])

    /// Decodes any JSON value.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let bool = try? container.decode(Bool.self) {
            self = .bool(bool)
        } else if let number = try? container.decode(Double.self) {
            self = .number(number)
        } else if let string = try? container.decode(String.self) {
            self = .string(string)
        } else if let array = try? container.decode([JSONValue].self) {
            self = .array(array)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    /// Parses a JSON document.
    /// - Throws: ``HTTPClientError/decoding(path:message:)`` when `data` is not JSON.
    public init(parsing data: Data) throws(HTTPClientError) {
        if let depth = Self.nestingBeyondLimit(data) {
            throw .decoding(path: "$", message: "nested deeper than \(depth) levels")
        }
        do {
            self = try JSONDecoder().decode(JSONValue.self, from: data)
        } catch {
            throw HTTPClientError(decoding: error)
        }
    }

    /// The most arrays and objects a document may nest: decoding is recursive, and a
    /// document of a million `[` must not exhaust the stack.
    static let maxDepth = 512

    /// `maxDepth` when `data` nests deeper than it, outside strings; otherwise `nil`.
    static func nestingBeyondLimit(_ data: Data) -> Int? {
        var depth = 0
        var inString = false
        var escaped = false
        for byte in data {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
                if depth > maxDepth { return maxDepth }
            case UInt8(ascii: "]"), UInt8(ascii: "}"): depth -= 1
            default: break
            }
        }
        return nil
    }

    /// The JSON type's name: `null`, `bool`, `number`, `string`, `array` or `object`.
    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "bool"
        case .number: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }
}
