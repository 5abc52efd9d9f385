package import Foundation

/// Parses a `Retry-After` field value: delay-seconds (`120`) or an HTTP-date in any of the
/// three forms RFC 9110 accepts (IMF-fixdate, RFC 850, asctime). Returns the delay from `now`,
/// never negative; nil for a value that is neither.
package enum RetryAfter {
    package static func delay(_ value: String, now: Date) -> Duration? {
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
