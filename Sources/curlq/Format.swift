import CurlQueue
import Foundation

/// Numbers and text as the display, the log lines and the summary show them.
enum Format {
    /// `512 B`, `1.5 KiB`, `23.4 MiB`, `1.02 GiB`.
    static func bytes(_ count: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
        var value = Double(max(0, count))
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        if unit == 0 { return "\(Int(value)) B" }
        let digits = value < 10 ? 2 : value < 100 ? 1 : 0
        return String(format: "%.\(digits)f %@", value, units[unit])
    }

    /// `3.2 MiB/s`, or `--` when there is no meaningful speed.
    static func speed(_ bytesPerSecond: Double?) -> String {
        guard let bytesPerSecond, bytesPerSecond.isFinite, bytesPerSecond >= 0 else { return "--" }
        return bytes(Int64(min(bytesPerSecond, 1e18))) + "/s"
    }

    /// `0.4s`, `12s`, `3:07`, `1:02:09`.
    static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite, seconds >= 0 else { return "--" }
        if seconds < 10 { return String(format: "%.1fs", seconds) }
        let whole = Int(min(seconds, 359_999).rounded())
        if whole < 60 { return "\(whole)s" }
        if whole < 3600 { return String(format: "%d:%02d", whole / 60, whole % 60) }
        return String(format: "%d:%02d:%02d", whole / 3600, whole / 60 % 60, whole % 60)
    }

    /// `url` as the display, the log lines and the summary show it: its userinfo (sent as
    /// Basic credentials, often a token itself) and the values of secret query parameters
    /// replaced by `REDACTED` (``SecretRedactor/standard``, as the library's logs), as standard
    /// error ends up in terminals and CI logs. The JSON report keeps URLs as they were given.
    static func url(_ url: URL) -> String {
        SecretRedactor.standard.redact(url)
    }

    /// `text` with control characters (which could move the cursor or change colours on a
    /// terminal) replaced by `?`, so that server-provided text cannot disturb the display.
    static func safe(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isUnsafe) else { return text }
        var result = String.UnicodeScalarView()
        for scalar in text.unicodeScalars { result.append(isUnsafe(scalar) ? "?" : scalar) }
        return String(result)
    }

    private static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
            || scalar.properties.generalCategory == .format
            || scalar.properties.generalCategory == .lineSeparator
            || scalar.properties.generalCategory == .paragraphSeparator
    }

    /// How many terminal columns `text` takes: East Asian wide characters and most emoji
    /// take two, combining marks none. An approximation of `wcwidth` that needs no locale.
    static func width(_ text: some StringProtocol) -> Int {
        var total = 0
        for scalar in text.unicodeScalars { total += width(of: scalar) }
        return total
    }

    static func width(of scalar: Unicode.Scalar) -> Int {
        let value = scalar.value
        if value < 0x20 || (0x7F..<0xA0).contains(value) { return 0 }
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format: return 0
        default: break
        }
        let wide: [ClosedRange<UInt32>] = [
            0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF,
            0xA000...0xA4CF, 0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60,
            0xFFE0...0xFFE6, 0x1F300...0x1F64F, 0x1F900...0x1F9FF, 0x20000...0x2FFFD, 0x30000...0x3FFFD,
        ]
        return wide.contains { $0.contains(value) } ? 2 : 1
    }

    /// `text` cut to at most `columns` columns (with `…` when cut), then padded with spaces
    /// to exactly `columns` when `pad`.
    static func fit(_ text: String, _ columns: Int, pad: Bool = false) -> String {
        guard columns > 0 else { return "" }
        var used = width(text)
        var result = text
        if used > columns {
            result = ""
            used = 0
            for character in text {
                let w = width(String(character))
                if used + w > columns - 1 { break }
                result.append(character)
                used += w
            }
            result += "…"
            used += 1
        }
        if pad, used < columns { result += String(repeating: " ", count: columns - used) }
        return result
    }

    /// `text` right-aligned in `columns` columns (not cut).
    static func right(_ text: String, _ columns: Int) -> String {
        let w = width(text)
        return w >= columns ? text : String(repeating: " ", count: columns - w) + text
    }
}
