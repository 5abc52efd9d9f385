import CurlQueue
import Foundation

/// JSONPath-style names for places in a document: `$`, `$.user.name`, `$.items[2]`, `$["a b"]`.
enum JSONPath {
    static func string(_ codingPath: [any CodingKey]) -> String {
        codingPath.reduce(into: "$") { path, key in
            if let index = key.intValue {
                path += "[\(index)]"
            } else {
                path += member(key.stringValue)
            }
        }
    }

    /// `.name` for a plain identifier, `["name"]` otherwise.
    static func member(_ name: String) -> String {
        let isIdentifier = !name.isEmpty && name.unicodeScalars.allSatisfy { scalar in
            scalar.isASCII && (CharacterSet.alphanumerics.contains(scalar) || scalar == "_")
        } && !(name.first?.isNumber ?? false)
        if isIdentifier { return "." + name }
        let escaped = name.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        return "[\"" + escaped + "\"]"
    }
}
