import CurlQueue
import Foundation

/// Percent-encoding for query strings and form bodies.
enum PercentEncoding {
    /// RFC 3986 unreserved characters: the only ones never encoded.
    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
             UInt8(ascii: "_"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    private static let hex = Array("0123456789ABCDEF".utf8)

    /// Every byte of `text`'s UTF-8 but the unreserved ones as `%XX`; a space is `%20` and
    /// a `+` `%2B`, so no server can read one as the other.
    static func component(_ text: String) -> String {
        encode(text, spaceAsPlus: false)
    }

    /// As ``component(_:)``, but a space is `+`, as `application/x-www-form-urlencoded` has it.
    static func formComponent(_ text: String) -> String {
        encode(text, spaceAsPlus: true)
    }

    private static func encode(_ text: String, spaceAsPlus: Bool) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            if isUnreserved(byte) {
                bytes.append(byte)
            } else if byte == UInt8(ascii: " ") && spaceAsPlus {
                bytes.append(UInt8(ascii: "+"))
            } else {
                bytes.append(UInt8(ascii: "%"))
                bytes.append(hex[Int(byte >> 4)])
                bytes.append(hex[Int(byte & 0x0F)])
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `name=value&…` for a URL query; an item without a value is just its name.
    static func query(_ items: [URLQueryItem]) -> String {
        items.map { item in
            item.value.map { component(item.name) + "=" + component($0) } ?? component(item.name)
        }.joined(separator: "&")
    }

    /// `name=value&…` for a form body; an item without a value has an empty one.
    static func form(_ items: [URLQueryItem]) -> String {
        items.map { formComponent($0.name) + "=" + formComponent($0.value ?? "") }.joined(separator: "&")
    }
}
