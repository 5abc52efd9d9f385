import CurlQueue
import Foundation

/// `-J/--remote-header-name`: the file name a `Content-Disposition` header proposes
/// (RFC 6266), made safe exactly as a URL's name is (``SafeFileName``).
///
/// A pure function of the header's text, for any text: never a crash, never a name with a path
/// separator, a `.`/`..`, a leading dot, a control character or more than
/// ``SafeFileName/maxBytes`` bytes (FuzzContentDisposition checks this).
package enum ContentDisposition {
    /// The safe base name the header proposes, or nil when it proposes none that is usable
    /// (no `filename`, an empty one, only `.`, `..` or separators): the URL's name stays.
    ///
    /// Only the base name counts: `../../etc/passwd` and `/etc/passwd` give `passwd`, and
    /// `C:\x\y.txt` gives `y.txt`. Whatever is left is then made safe by ``SafeFileName/sanitizedName(_:)``.
    package static func safeName(_ value: String?) -> String? {
        guard let value, let raw = fileName(value) else { return nil }
        let scalars = raw.unicodeScalars  // not characters: a combining mark may follow the `/`
        let base = scalars.lastIndex(where: { $0 == "/" || $0 == "\\" }).map { scalars[scalars.index(after: $0)...] } ?? scalars[...]
        return SafeFileName.sanitizedName(String(String.UnicodeScalarView(base)))
    }

    /// The file name the header carries, decoded but not made safe: `filename*` (RFC 8187:
    /// `UTF-8''…` or `ISO-8859-1''…`, percent-decoded) when present and decodable, else
    /// `filename` (a token, or a quoted string with its `\` escapes undone; `%` is not decoded
    /// there, as RFC 6266 says). The disposition type does not matter (curl's `-J` and a
    /// browser's "save as" take the name of an `inline` response too). Parameter names are
    /// case-insensitive; of a repeated one, the first counts. Nil when there is none.
    package static func fileName(_ value: String) -> String? {
        var plain: String?
        var extended: String?
        for (name, parameter) in parameters(Array(value.utf8)) {
            switch name {
            case "filename" where plain == nil:
                plain = String(decoding: parameter, as: UTF8.self)
            case "filename*" where extended == nil:
                extended = decodeExtended(parameter)
            default:
                continue
            }
        }
        return extended ?? plain
    }

    /// The `name=value` parameters after the disposition type, names lowercased, values
    /// unquoted. Lenient: a segment without `=` is skipped, a quoted string without its closing
    /// quote runs to the end, and an unquoted value runs to the next `;` (spaces and all).
    package static func parameters(_ bytes: [UInt8]) -> [(name: String, value: [UInt8])] {
        let semicolon = UInt8(ascii: ";"), equals = UInt8(ascii: "="), quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\")
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }
        var result: [(name: String, value: [UInt8])] = []
        var index = 0
        // The disposition type: up to the first `;`, unless it is already a parameter.
        let typeEnd = bytes.firstIndex(of: semicolon) ?? bytes.endIndex
        if !bytes[..<typeEnd].contains(equals) { index = typeEnd }
        while index < bytes.count {
            while index < bytes.count, bytes[index] == semicolon || isSpace(bytes[index]) { index += 1 }
            let nameStart = index
            while index < bytes.count, bytes[index] != equals, bytes[index] != semicolon { index += 1 }
            guard index < bytes.count, bytes[index] == equals else { continue }  // no value: skipped
            var name = Array(bytes[nameStart..<index])
            while let last = name.last, isSpace(last) { name.removeLast() }
            index += 1
            while index < bytes.count, isSpace(bytes[index]) { index += 1 }
            var value: [UInt8] = []
            if index < bytes.count, bytes[index] == quote {
                index += 1
                while index < bytes.count, bytes[index] != quote {
                    if bytes[index] == backslash, index + 1 < bytes.count { index += 1 }  // quoted-pair
                    value.append(bytes[index])
                    index += 1
                }
                index += 1  // the closing quote (or the end)
                while index < bytes.count, bytes[index] != semicolon { index += 1 }  // junk after it
            } else {
                while index < bytes.count, bytes[index] != semicolon {
                    value.append(bytes[index])
                    index += 1
                }
                while let last = value.last, isSpace(last) { value.removeLast() }
            }
            result.append((String(decoding: name, as: UTF8.self).lowercased(), value))
        }
        return result
    }

    /// RFC 8187's `charset'language'percent-encoded`: UTF-8 (valid, else nil) or ISO-8859-1;
    /// any other charset is nil, so that `filename` is used instead.
    package static func decodeExtended(_ value: [UInt8]) -> String? {
        let apostrophe = UInt8(ascii: "'")
        guard let first = value.firstIndex(of: apostrophe),
              let second = value[(first + 1)...].firstIndex(of: apostrophe) else { return nil }
        let charset = String(decoding: value[..<first], as: UTF8.self).lowercased()
        let bytes = TextEscaping.percentDecodedBytes(Array(value[(second + 1)...]))
        switch charset {
        case "utf-8":
            let text = String(decoding: bytes, as: UTF8.self)
            return Array(text.utf8) == bytes ? text : nil  // invalid UTF-8: not this name
        case "iso-8859-1":
            var text = String.UnicodeScalarView()
            for byte in bytes { text.append(Unicode.Scalar(byte)) }
            return String(text)
        default:
            return nil
        }
    }
}
