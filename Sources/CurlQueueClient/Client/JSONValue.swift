import CurlQueue
public import Foundation

/// A JSON document as it is, with booleans kept apart from numbers.
///
/// ``init(parsing:)`` reads a document with a parser of its own: `JSONSerialization` on Linux
/// gives `true` and `1` the same `NSNumber`, and `JSONDecoder` reaches this type only by
/// trying each type in turn, which costs more the deeper the document (the `Decodable`
/// conformance, for a `JSONValue` inside a type of your own, does just that).
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

    /// Parses a JSON document, in one pass over its bytes (see ``Parser``): a value of any
    /// type at the top, arrays and objects nested at most ``maxDepth`` deep.
    /// - Throws: ``HTTPClientError/decoding(path:message:)`` when `data` is not JSON, with the
    ///   byte where it stops being JSON.
    public init(parsing data: Data) throws(HTTPClientError) {
        var parser = Parser(data)
        do {
            self = try parser.document()
        } catch {
            throw .decoding(path: "$", message: error.message)
        }
    }

    /// The most arrays and objects a document may nest, so that a document of a million `[`
    /// is refused at once instead of exhausting the stack.
    static let maxDepth = 512

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
