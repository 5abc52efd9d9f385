@testable import CurlQueueClient
import Foundation

/// A response body as a server sends it, read with `JSONValue(parsing:)`, as an `HTTPClient`
/// call with a `JSONValidator` reads it.
///
/// Checked: a document either parses or fails with `HTTPClientError.decoding` at `$` (never a
/// trap, a hang or another error); a parsed document without non-finite numbers, written back as
/// JSON, parses to the same value.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSONValue(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Data(UnsafeBufferPointer(start: data, count: size))
    let value: JSONValue
    do {
        value = try JSONValue(parsing: bytes)
    } catch {
        guard case .decoding(path: "$", message: _) = error else { fatalError("not a decoding error: \(error)") }
        return 0
    }
    guard var text = written(value) else { return 0 }  // holds an infinite number: JSON has none
    text += " "
    do {
        let again = try JSONValue(parsing: Data(text.utf8))
        if again != value { fatalError("written back as \(text.debugDescription), parses to \(again), not \(value)") }
    } catch {
        fatalError("written back as \(text.debugDescription), does not parse: \(error)")
    }
    return 0
}

/// `value` as JSON text; nil when it holds a number JSON cannot write.
private func written(_ value: JSONValue) -> String? {
    switch value {
    case .null: return "null"
    case .bool(let flag): return flag ? "true" : "false"
    case .number(let number): return number.isFinite ? "\(number)" : nil
    case .string(let string): return quoted(string)
    case .array(let elements):
        var parts: [String] = []
        for element in elements {
            guard let part = written(element) else { return nil }
            parts.append(part)
        }
        return "[" + parts.joined(separator: ",") + "]"
    case .object(let members):
        var parts: [String] = []
        for (key, member) in members {
            guard let part = written(member) else { return nil }
            parts.append(quoted(key) + ":" + part)
        }
        return "{" + parts.joined(separator: ",") + "}"
    }
}

private func quoted(_ string: String) -> String {
    var result = "\""
    for scalar in string.unicodeScalars {
        switch scalar {
        case "\"": result += "\\\""
        case "\\": result += "\\\\"
        case _ where scalar.value < 0x20: result += String(format: "\\u%04x", scalar.value)
        default: result.unicodeScalars.append(scalar)
        }
    }
    return result + "\""
}
