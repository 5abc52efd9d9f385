import CurlQueue
public import Foundation

/// The shape a JSON response must have, checked before it is decoded — YTKNetwork's
/// `jsonValidator`, with booleans told apart from numbers.
///
/// ```swift
/// // {"nick": "ann", "level": 3}
/// let user: JSONValidator = .object(["nick": .string, "level": .number])
/// // [{"id": 1, "question": {"id": 2, "content": "…"}}, …]
/// let questions: JSONValidator = .array(of: .object([
///     "id": .number,
///     "question": .object(["id": .number, "content": .string]),
/// ]))
/// ```
///
/// Keys an object validator names are required (wrap in ``optional(_:)`` to allow them to be
/// absent or `null`); other keys are allowed. The first mismatch, in key order, is reported as
/// ``HTTPClientError/validation(path:expected:got:)`` with its place in the document:
/// `validation(path: "$[0].question.id", expected: "number", got: "string")`. Any input,
/// however malformed or deeply nested, gives a value or an error, never a crash.
public indirect enum JSONValidator: Hashable, Sendable {
    /// Any value, `null` included.
    case any
    /// `null`.
    case null
    /// `true` or `false` (not `0` or `1`).
    case bool
    /// A number (not a boolean, not a numeric string).
    case number
    /// A string.
    case string
    /// An array whose every element matches.
    case array(of: JSONValidator)
    /// An object holding at least these keys, each matching its validator.
    case object([String: JSONValidator])
    /// The value may be `null` or, as an object member, absent; otherwise it must match.
    case optional(JSONValidator)

    /// What this validator expects, as reported in errors.
    public var expectation: String {
        switch self {
        case .any: return "any"
        case .null: return "null"
        case .bool: return "bool"
        case .number: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        case .optional(let wrapped): return wrapped.expectation + " or null"
        }
    }

    /// Checks a JSON document.
    /// - Throws: ``HTTPClientError/decoding(path:message:)`` when `data` is not JSON,
    ///   ``HTTPClientError/validation(path:expected:got:)`` at the first mismatch.
    public func validate(_ data: Data) throws(HTTPClientError) {
        try validate(try JSONValue(parsing: data))
    }

    /// Checks a parsed JSON value.
    /// - Throws: ``HTTPClientError/validation(path:expected:got:)`` at the first mismatch.
    public func validate(_ value: JSONValue) throws(HTTPClientError) {
        try check(value, at: "$")
    }

    private func check(_ value: JSONValue, at path: String) throws(HTTPClientError) {
        switch (self, value) {
        case (.any, _), (.null, .null), (.bool, .bool), (.number, .number), (.string, .string):
            return
        case (.optional, .null):
            return
        case (.optional(let wrapped), _):
            do {
                try wrapped.check(value, at: path)
            } catch .validation(path, _, let got) {
                throw .validation(path: path, expected: expectation, got: got)  // "string or null"
            }
        case (.array(let element), .array(let values)):
            for (index, item) in values.enumerated() {
                try element.check(item, at: path + "[\(index)]")
            }
        case (.object(let members), .object(let object)):
            for key in members.keys.sorted() {
                let memberPath = path + JSONPath.member(key)
                let validator = members[key]!
                guard let member = object[key] else {
                    if case .optional = validator { continue }
                    throw .validation(path: memberPath, expected: validator.expectation, got: "missing")
                }
                try validator.check(member, at: memberPath)
            }
        default:
            throw .validation(path: path, expected: expectation, got: value.typeName)
        }
    }
}
