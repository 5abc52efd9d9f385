package import Foundation
import CCurl

/// HTTP-dates (RFC 9110 §5.6.7: IMF-fixdate, RFC 850, asctime), parsed by libcurl's
/// `curl_getdate`, which is thread-safe and as robust as RFC 9110 asks recipients to be (a
/// missing or numeric zone is accepted; an impossible day, hour or month is refused).
package enum HTTPDate {
    package static func parse(_ string: String) -> Date? {
        // -1 means unparsable; it is also 1969-12-31 23:59:59, a date no caller needs.
        let seconds = curl_getdate(string, nil)
        // Years 1 to 9999 only, as RFC 9110's four-digit years: libcurl accepts a year of any
        // length ("01-Jan-799999999" was found by FuzzRetryAfter).
        guard seconds != -1, (-62_135_596_800 ..< 253_402_300_800).contains(Int64(seconds)) else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }
}
