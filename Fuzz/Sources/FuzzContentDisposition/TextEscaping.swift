/// The one function of CurlQueue's `TextEscaping` that SafeFileName.swift calls (for URL names,
/// which this target does not fuzz): that enum is `package`, which this package cannot see, so
/// the same decoder stands here (a declaration of this module shadows an imported one).
enum TextEscaping {
    static func percentDecoded(_ text: some StringProtocol) -> String {
        guard text.contains("%") else { return String(text) }
        let utf8 = Array(text.utf8)
        var bytes: [UInt8] = []
        var index = 0
        while index < utf8.count {
            if utf8[index] == UInt8(ascii: "%"), index + 2 < utf8.count,
               let high = hexValue(utf8[index + 1]), let low = hexValue(utf8[index + 2]) {
                bytes.append(high << 4 | low)
                index += 3
            } else {
                bytes.append(utf8[index])
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
