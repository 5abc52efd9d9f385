/// Escapes the products share (curlq's report and file names, the demo server): `package`,
/// not public API. Fuzz/ compiles this file into its targets (a link), so it imports nothing.
package enum TextEscaping {
    /// `text` with its `%XX` escapes decoded; a malformed escape stays as it is and invalid
    /// UTF-8 becomes U+FFFD.
    package static func percentDecoded(_ text: some StringProtocol) -> String {
        guard text.contains("%") else { return String(text) }
        return String(decoding: percentDecodedBytes(Array(text.utf8)), as: UTF8.self)
    }

    /// `bytes` with their `%XX` escapes decoded; a malformed escape stays as it is.
    package static func percentDecodedBytes(_ bytes: [UInt8]) -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count,
               let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2]) {
                result.append(high << 4 | low)
                index += 3
            } else {
                result.append(bytes[index])
                index += 1
            }
        }
        return result
    }

    /// `text` as a JSON string literal: quotes and backslashes escaped, and control characters,
    /// DEL, U+2028 and U+2029 as `\uXXXX` (so a line of JSON stays one line everywhere).
    package static func jsonLiteral(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F || scalar.value == 0x2028 || scalar.value == 0x2029:
                let hex = String(scalar.value, radix: 16)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default:
                result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
