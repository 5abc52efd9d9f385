import CurlQueue
@testable import CurlQueueClient
import CurlQueueTestHelpers
import Foundation
import HTTPTypes
import Testing

/// RFC 9111's rules as ``CacheRules`` applies them, with a fixed clock.
@Suite struct CacheRulesTests {
    let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    func httpDate(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }

    func fields(_ pairs: [(String, String)]) -> HTTPFields {
        var fields = HTTPFields()
        for (name, value) in pairs { fields.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
        return fields
    }

    func entry(_ pairs: [(String, String)], ttl: Duration? = nil, vary: [String: String] = [:], received: TimeInterval = 0) -> CachedResponse {
        CachedResponse(status: .ok, headerFields: fields(pairs), body: Data("body".utf8),
                       requestedAt: t0.addingTimeInterval(received), receivedAt: t0.addingTimeInterval(received),
                       varyingRequestFields: vary, timeToLive: ttl)
    }

    @Test func cacheControlDirectivesAreParsedAcrossLinesAndQuotes() {
        let control = CacheControl(fields([
            ("Cache-Control", "Max-Age=60, private=\"a, no-store\""),
            ("Cache-Control", "max-age=30 , must-revalidate"),
        ]))
        #expect(control.maxAge == 30)  // the strictest of the two
        #expect(!control.noStore)      // inside a quoted string, not a directive
        #expect(control.mustRevalidate)
        #expect(CacheControl(fields([("Cache-Control", "max-age=abc")])).maxAge == 0)
        #expect(CacheControl(fields([("Cache-Control", "max-age=\"15\"")])).maxAge == 15)
        #expect(CacheControl(fields([("Cache-Control", "max-age=99999999999999999999")])).maxAge == 1 << 31)
        #expect(CacheControl(fields([("Cache-Control", "max-age=00000000060")])).maxAge == 60)  // not 68 years
        #expect(CacheControl(fields([("Cache-Control", "no-cache,no-store")])) .noStore)
    }

    @Test func maxAgeMakesAResponseFreshUntilItsAgePassesIt() {
        let stored = entry([("Cache-Control", "max-age=60")])
        #expect(CacheRules.isFresh(stored, requestFields: [:], now: t0.addingTimeInterval(59)))
        #expect(!CacheRules.isFresh(stored, requestFields: [:], now: t0.addingTimeInterval(60)))
    }

    @Test func theAgeCountsTheAgeFieldAndTheServersDate() {
        // 40 s old when it arrived (Age), so 20 s of the 60 are left.
        let aged = entry([("Cache-Control", "max-age=60"), ("Age", "40")])
        #expect(CacheRules.isFresh(aged, requestFields: [:], now: t0.addingTimeInterval(19)))
        #expect(!CacheRules.isFresh(aged, requestFields: [:], now: t0.addingTimeInterval(21)))
        // The server's Date says it was made 30 s before it arrived.
        let dated = entry([("Cache-Control", "max-age=60"), ("Date", httpDate(t0.addingTimeInterval(-30)))])
        #expect(CacheRules.currentAge(dated, now: t0) == 30)
    }

    @Test func expiresCountsFromTheServersDateAndAnInvalidOneIsExpired() {
        let stored = entry([("Date", httpDate(t0)), ("Expires", httpDate(t0.addingTimeInterval(120)))])
        #expect(CacheRules.freshnessLifetime(stored) == 120)
        #expect(CacheRules.isFresh(stored, requestFields: [:], now: t0.addingTimeInterval(100)))
        #expect(!CacheRules.isFresh(entry([("Expires", "0")]), requestFields: [:], now: t0))
        // max-age wins over Expires.
        let both = entry([("Cache-Control", "max-age=5"), ("Expires", httpDate(t0.addingTimeInterval(120)))])
        #expect(CacheRules.freshnessLifetime(both) == 5)
    }

    @Test func aTTLReplacesTheResponsesOwnFreshness() {
        let stored = entry([("Cache-Control", "max-age=0, no-cache")], ttl: .seconds(300))
        #expect(CacheRules.isFresh(stored, requestFields: [:], now: t0.addingTimeInterval(299)))
        #expect(!CacheRules.isFresh(stored, requestFields: [:], now: t0.addingTimeInterval(301)))
    }

    @Test func aTTLCountsFromTheResponsesArrivalNotFromItsAgeOrTheServersClock() {
        // An Age past the TTL, or a server clock an hour behind, do not make it stale at once.
        let aged = entry([("Age", "600")], ttl: .seconds(60))
        #expect(CacheRules.isFresh(aged, requestFields: [:], now: t0.addingTimeInterval(59)))
        #expect(!CacheRules.isFresh(aged, requestFields: [:], now: t0.addingTimeInterval(61)))
        let skewed = entry([("Date", httpDate(t0.addingTimeInterval(-3600)))], ttl: .seconds(60))
        #expect(CacheRules.isFresh(skewed, requestFields: [:], now: t0.addingTimeInterval(59)))
        #expect(!CacheRules.isFresh(skewed, requestFields: [:], now: t0.addingTimeInterval(61)))
        // A request's max-age still counts against the same age.
        #expect(!CacheRules.isFresh(aged, requestFields: fields([("Cache-Control", "max-age=10")]), now: t0.addingTimeInterval(11)))
        #expect(CacheRules.isFresh(aged, requestFields: fields([("Cache-Control", "max-age=10")]), now: t0.addingTimeInterval(9)))
    }

    @Test func noCacheAndRequestDirectivesForceRevalidation() {
        #expect(!CacheRules.isFresh(entry([("Cache-Control", "max-age=60, no-cache")]), requestFields: [:], now: t0))
        let stored = entry([("Cache-Control", "max-age=60")])
        #expect(!CacheRules.isFresh(stored, requestFields: fields([("Cache-Control", "no-cache")]), now: t0))
        #expect(!CacheRules.isFresh(stored, requestFields: fields([("Cache-Control", "max-age=10")]), now: t0.addingTimeInterval(11)))
        #expect(!CacheRules.isFresh(stored, requestFields: fields([("Cache-Control", "min-fresh=30")]), now: t0.addingTimeInterval(31)))
        #expect(CacheRules.isFresh(stored, requestFields: fields([("Cache-Control", "min-fresh=30")]), now: t0.addingTimeInterval(29)))
    }

    @Test func noHeuristicFreshness() {
        let stored = entry([("Last-Modified", httpDate(t0.addingTimeInterval(-86_400)))])
        #expect(CacheRules.freshnessLifetime(stored) == nil)
        #expect(!CacheRules.isFresh(stored, requestFields: [:], now: t0))
    }

    @Test func onlyGETResponsesWithFreshnessOrAValidatorAreStored() {
        func storable(_ method: HTTPRequest.Method = .get, status: Int = 200, request: [(String, String)] = [],
                      response: [(String, String)], ttl: Duration? = nil) -> Bool {
            CacheRules.isStorable(method: method, requestFields: fields(request), status: status,
                                  responseFields: fields(response), timeToLive: ttl)
        }
        #expect(storable(response: [("Cache-Control", "max-age=60")]))
        #expect(storable(response: [("ETag", "\"v1\"")]))
        #expect(storable(response: [], ttl: .seconds(5)))
        #expect(!storable(response: []))
        #expect(!storable(.post, response: [("Cache-Control", "max-age=60")]))
        #expect(!storable(status: 206, response: [("Cache-Control", "max-age=60")]))
        #expect(!storable(status: 500, response: [("Cache-Control", "max-age=60")]))
        #expect(!storable(response: [("Cache-Control", "max-age=60, no-store")]))
        #expect(!storable(request: [("Cache-Control", "no-store")], response: [("Cache-Control", "max-age=60")]))
        #expect(!storable(response: [("Cache-Control", "max-age=60"), ("Vary", "*")]))
        #expect(!storable(response: [("Cache-Control", "max-age=60")].map { $0 } + [("Vary", "Accept, *")]))
    }

    @Test func varyMatchesOnlyTheSameRequestValues() {
        let response = fields([("Cache-Control", "max-age=60"), ("Vary", "Accept-Language, accept")])
        let request = fields([("Accept-Language", "fi"), ("User-Agent", "x")])
        let vary = CacheRules.varyingFields(responseFields: response, requestFields: request)
        #expect(vary == ["accept-language": "fi"])
        let stored = CachedResponse(status: .ok, headerFields: response, body: Data(), requestedAt: t0,
                                    receivedAt: t0, varyingRequestFields: vary ?? [:])
        #expect(CacheRules.matches(stored, requestFields: fields([("Accept-Language", "fi"), ("User-Agent", "y")])))
        #expect(!CacheRules.matches(stored, requestFields: fields([("Accept-Language", "en")])))
        #expect(!CacheRules.matches(stored, requestFields: [:]))
        // A field absent when stored must be absent now.
        #expect(!CacheRules.matches(stored, requestFields: fields([("Accept-Language", "fi"), ("Accept", "text/html")])))
    }

    @Test func conditionalFieldsComeFromTheValidators() {
        let stored = entry([("ETag", "\"v1\""), ("Last-Modified", "Tue, 14 Nov 2023 22:13:20 GMT")])
        let conditional = CacheRules.conditionalFields(for: stored)
        #expect(conditional[.ifNoneMatch] == "\"v1\"")
        #expect(conditional[.ifModifiedSince] == "Tue, 14 Nov 2023 22:13:20 GMT")
        #expect(CacheRules.conditionalFields(for: entry([("Cache-Control", "max-age=1")])).isEmpty)
    }

    @Test func aNotModifiedUpdatesFieldsButKeepsTheBodyAndItsFraming() {
        let stored = entry([("Cache-Control", "max-age=10"), ("ETag", "\"v1\""), ("Content-Length", "4"), ("X-Old", "1")])
        let updated = CacheRules.revalidated(
            stored,
            notModifiedFields: fields([("Cache-Control", "max-age=100"), ("Content-Length", "0"), ("X-New", "2")]),
            requestedAt: t0.addingTimeInterval(50), receivedAt: t0.addingTimeInterval(51))
        #expect(updated.body == stored.body)
        #expect(updated.headerFields[.contentLength] == "4")
        #expect(updated.headerFields[.cacheControl] == "max-age=100")
        #expect(updated.headerFields[HTTPField.Name("X-Old")!] == "1")
        #expect(updated.headerFields[HTTPField.Name("X-New")!] == "2")
        #expect(CacheRules.isFresh(updated, requestFields: [:], now: t0.addingTimeInterval(140)))
    }

    @Test func theKeyIgnoresTheFragment() {
        let url = URL(string: "https://example.com/a?b=1#frag")!
        #expect(CacheRules.key(method: .get, url: url) == "GET https://example.com/a?b=1")
    }
}
