import CurlQueue
import CurlQueueTestHelpers
import Foundation
import Testing

/// `HTTPDate.parse` is libcurl's `curl_getdate`: these pin what the cache (`Expires`, `Date`)
/// and `Retry-After` rely on, so a libcurl that parsed differently would show here.
@Suite struct HTTPDateTests {
    @Test(arguments: [
        ("Sun, 06 Nov 1994 08:49:37 GMT", 784_111_777.0),
        ("Sunday, 06-Nov-94 08:49:37 GMT", 784_111_777),
        ("Sun Nov  6 08:49:37 1994", 784_111_777),
        ("Sun, 06 Nov 1994 08:49:37 +0500", 784_093_777),
        ("Thu, 01 Jan 1970 00:00:00 GMT", 0),
    ])
    func parsesTheFormsOfRFC9110(value: String, expected: TimeInterval) {
        #expect(HTTPDate.parse(value) == Date(timeIntervalSince1970: expected))
    }

    @Test(arguments: ["", "0", "-1", "yesterday", "Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 25:49:37 GMT",
                       "Thursday, 01-Jan-799999999gmt"])
    func refusesWhatIsNotADate(value: String) {
        #expect(HTTPDate.parse(value) == nil)
    }
}
