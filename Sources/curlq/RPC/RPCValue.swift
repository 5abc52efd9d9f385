import Foundation

/// A JSON value as the JSON-RPC endpoint reads and writes it. Numbers keep their text, so
/// that a request's `id` goes back exactly as it came (aria2 echoes it unchanged).
enum RPCValue: Sendable, Hashable {
    case null
    case bool(Bool)
    /// The number's JSON text, as read (or written by ``number(_:)``).
    case number(String)
    case string(String)
    case array([RPCValue])
    /// Members in the order read; a repeated name keeps its last value when looked up.
    case object([(String, RPCValue)])

    static func number(_ value: Int64) -> RPCValue { .number(String(value)) }

    static func == (lhs: RPCValue, rhs: RPCValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.number(let a), .number(let b)): a == b
        case (.string(let a), .string(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)): a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: false
        }
    }

    func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let value): hasher.combine(value)
        case .number(let text), .string(let text): hasher.combine(text)
        case .array(let values): hasher.combine(values)
        case .object(let members):
            for (name, value) in members {
                hasher.combine(name)
                hasher.combine(value)
            }
        }
    }

    /// The member `name` of an object (its last occurrence), else nil.
    subscript(name: String) -> RPCValue? {
        guard case .object(let members) = self else { return nil }
        return members.last { $0.0 == name }?.1
    }

    var string: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    var array: [RPCValue]? {
        if case .array(let values) = self { return values }
        return nil
    }

    /// An integer given as a JSON number or as a string of digits (aria2 takes both).
    var integer: Int? {
        switch self {
        case .number(let text), .string(let text): Int(text)
        default: nil
        }
    }

    /// The value as JSON text: no insignificant space, `/` not escaped.
    var json: String {
        var out = ""
        write(into: &out)
        return out
    }

    private func write(into out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let value): out += value ? "true" : "false"
        case .number(let text): out += text
        case .string(let text): Self.writeString(text, into: &out)
        case .array(let values):
            out += "["
            for (index, value) in values.enumerated() {
                if index > 0 { out += "," }
                value.write(into: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (index, (name, value)) in members.enumerated() {
                if index > 0 { out += "," }
                Self.writeString(name, into: &out)
                out += ":"
                value.write(into: &out)
            }
            out += "}"
        }
    }

    private static func writeString(_ text: String, into out: inout String) {
        out += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{2028}": out += "\\u2028"
            case "\u{2029}": out += "\\u2029"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }
}
