package import Foundation

/// Parses a `Retry-After` field value: delay-seconds (`120`) or an HTTP-date in any of the
/// three forms RFC 9110 accepts (IMF-fixdate, RFC 850, asctime). Returns the delay from `now`,
/// never negative; nil for a value that is neither.
enum RetryAfter {
    static func delay(_ value: String, now: Date) -> Duration? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if !trimmed.isEmpty, trimmed.utf8.allSatisfy({ (0x30...0x39).contains($0) }) {
            guard trimmed.utf8.count <= 9, let seconds = Int(trimmed) else { return .seconds(999_999_999) }
            return .seconds(seconds)
        }
        guard let date = HTTPDate.parse(trimmed) else { return nil }
        let seconds = max(0, date.timeIntervalSince(now))
        return .milliseconds(Int64((seconds * 1000).rounded(.up)))
    }
}

/// The HTTP-date formats of RFC 9110 §5.6.7, parsed without `DateFormatter` (no locale, no
/// allocation of formatters, safe on any thread).
package enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun",
                                 "jul", "aug", "sep", "oct", "nov", "dec"]

    package static func parse(_ string: String) -> Date? {
        // Split on spaces, commas, dashes and colons; each form then has a fixed shape.
        let parts = string.split(whereSeparator: { " ,-:".contains($0) }).map(String.init)
        guard parts.count >= 7 else { return nil }
        var day: Int?, monthName: String, year: Int?, hour: Int?, minute: Int?, second: Int?
        if parts.count == 8, parts[7].uppercased() == "GMT" {
            // IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT" or RFC 850 "Sunday, 06-Nov-94 08:49:37 GMT"
            day = Int(parts[1]); monthName = parts[2]; year = Int(parts[3])
            hour = Int(parts[4]); minute = Int(parts[5]); second = Int(parts[6])
            if let y = year, parts[3].count == 2 { year = y < 70 ? 2000 + y : 1900 + y }
        } else if parts.count == 7 {
            // asctime "Sun Nov  6 08:49:37 1994"
            monthName = parts[1]; day = Int(parts[2]); hour = Int(parts[3])
            minute = Int(parts[4]); second = Int(parts[5]); year = Int(parts[6])
        } else {
            return nil
        }
        guard let month = months.firstIndex(of: monthName.lowercased()),
              let d = day, let y = year, let h = hour, let m = minute, let s = second,
              (1...31).contains(d), (1...9999).contains(y), (0...23).contains(h),
              (0...59).contains(m), (0...60).contains(s) else { return nil }
        // Days from the civil date (proleptic Gregorian), Howard Hinnant's algorithm.
        let mo = month + 1
        let yy = mo <= 2 ? y - 1 : y
        let era = (yy >= 0 ? yy : yy - 399) / 400
        let yoe = yy - era * 400
        let doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        let seconds = days * 86_400 + h * 3600 + m * 60 + s
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }
}
