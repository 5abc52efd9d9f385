import CurlQueue
import CurlQueueClient
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import HTTPTypes
import Testing

/// The response cache against the fixture's `/cache/ID` route. The server counts every request
/// (`cache-ID`) and every body it sends (`cache-body-ID`, which is also the body's `#N`), so
/// each test sees exactly what went over the network.
@Suite struct ResponseCacheTests {
    /// A clock the test moves by hand.
    final class TestClock: Sendable {
        private let current = LockedBox(Date())
        var now: Date { current.value }
        func advance(_ seconds: TimeInterval) { current.update { $0 = $0.addingTimeInterval(seconds) } }
    }

    struct Setup {
        let server: FixtureServer
        let cache: ResponseCache
        let clock: TestClock
        let queue = RequestQueue()

        func get(_ path: String, policy: CachePolicy = .useProtocolCachePolicy, ttl: Duration? = nil,
                 fields: [(HTTPField.Name, String)] = []) async throws -> Response {
            var request = Request(url: server.url(path))
            for (name, value) in fields { request.headerFields[name] = value }
            return try await cache.response(for: request, policy: policy, timeToLive: ttl) { try await queue.response(for: $0) }
        }

        /// The body of `get` as text.
        func text(_ path: String, policy: CachePolicy = .useProtocolCachePolicy, ttl: Duration? = nil,
                  fields: [(HTTPField.Name, String)] = []) async throws -> String {
            String(decoding: try await get(path, policy: policy, ttl: ttl, fields: fields).body, as: UTF8.self)
        }
    }

    func withCache(store: any ResponseCacheStore = MemoryCacheStore(), _ body: (Setup) async throws -> Void) async throws {
        try await withServer { server in
            let clock = TestClock()
            try await body(Setup(server: server, cache: ResponseCache(store: store, now: { clock.now }), clock: clock))
        }
    }

    func text(_ response: Response) -> String { String(decoding: response.body, as: UTF8.self) }

    @Test func aFreshResponseIsAnsweredWithNoNetworkTraffic() async throws {
        try await withCache { setup in
            let first = try await setup.get("/cache/fresh?maxAge=60")
            setup.clock.advance(30)
            let second = try await setup.get("/cache/fresh?maxAge=60")
            #expect(text(first) == "fresh #1" && text(second) == "fresh #1")
            #expect(first.attempts == 1 && second.attempts == 0)
            #expect(second.headerFields[.age] == "30")
            #expect(setup.server.hits("cache-fresh") == 1)
            // Past max-age, with no validator: loaded again.
            setup.clock.advance(31)
            #expect(try await setup.text("/cache/fresh?maxAge=60") == "fresh #2")
            #expect(setup.server.hits("cache-fresh") == 2)
        }
    }

    @Test func noStoreIsNeverKept() async throws {
        try await withCache { setup in
            _ = try await setup.get("/cache/nostore?cc=no-store,max-age=60")
            #expect(try await setup.text("/cache/nostore?cc=no-store,max-age=60") == "nostore #2")
            #expect(setup.server.hits("cache-nostore") == 2)
        }
    }

    @Test func aStaleResponseWithAnETagIsRevalidatedAndA304ReturnsTheStoredBody() async throws {
        try await withCache { setup in
            _ = try await setup.get("/cache/etag?maxAge=10&etag=v1")
            setup.clock.advance(11)
            let revalidated = try await setup.get("/cache/etag?maxAge=10&etag=v1")
            #expect(revalidated.status == .ok)
            #expect(text(revalidated) == "etag #1")
            #expect(revalidated.attempts == 1)
            #expect(setup.server.hits("cache-etag") == 2)       // two requests…
            #expect(setup.server.hits("cache-body-etag") == 1)  // …one body
            #expect(setup.server.requests.last?.header("if-none-match") == "\"v1\"")
            // The 304 renewed the entry: fresh again for 10 s.
            setup.clock.advance(5)
            #expect(try await setup.get("/cache/etag?maxAge=10&etag=v1").attempts == 0)
            #expect(setup.server.hits("cache-etag") == 2)
        }
    }

    @Test func lastModifiedRevalidatesToo() async throws {
        try await withCache { setup in
            _ = try await setup.get("/cache/lm?lastModified=1")
            let again = try await setup.get("/cache/lm?lastModified=1")
            #expect(text(again) == "lm #1")
            #expect(setup.server.requests.last?.header("if-modified-since") == "Tue, 14 Nov 2023 22:13:20 GMT")
            #expect(setup.server.hits("cache-body-lm") == 1)
        }
    }

    @Test func noCacheMeansRevalidateEveryTime() async throws {
        try await withCache { setup in
            for _ in 0..<3 {
                let body = try await setup.text("/cache/nc?cc=no-cache&etag=x")
                #expect(body == "nc #1")
            }
            #expect(setup.server.hits("cache-nc") == 3)
            #expect(setup.server.hits("cache-body-nc") == 1)
        }
    }

    @Test func expiresGivesFreshnessAndAnInvalidOneDoesNot() async throws {
        try await withCache { setup in
            _ = try await setup.get("/cache/exp?expires=100")
            #expect(try await setup.get("/cache/exp?expires=100").attempts == 0)
            _ = try await setup.get("/cache/expbad?expires=bad&maxAge=0")
            #expect(try await setup.text("/cache/expbad?expires=bad") == "expbad #2")
        }
    }

    @Test func policiesDecideBetweenStoreAndNetwork() async throws {
        try await withCache { setup in
            // Nothing stored: returnCacheDontLoad fails without a request.
            await #expect(throws: ResponseCacheMiss.self) { try await setup.get("/cache/p?maxAge=0&etag=e", policy: .returnCacheDontLoad) }
            #expect(setup.server.hits("cache-p") == 0)
            // reloadIgnoringCache loads each time, and stores.
            _ = try await setup.get("/cache/p?maxAge=0&etag=e", policy: .reloadIgnoringCache)
            #expect(try await setup.text("/cache/p?maxAge=0&etag=e", policy: .reloadIgnoringCache) == "p #2")
            #expect(setup.server.requests.last?.header("if-none-match") == nil)
            // Stale, but these two policies take it as it is.
            let stale = try await setup.get("/cache/p?maxAge=0&etag=e", policy: .returnCacheElseLoad)
            let staleToo = try await setup.get("/cache/p?maxAge=0&etag=e", policy: .returnCacheDontLoad)
            #expect(text(stale) == "p #2" && text(staleToo) == "p #2")
            #expect(stale.attempts == 0 && staleToo.attempts == 0)
            #expect(setup.server.hits("cache-p") == 2)
            // returnCacheElseLoad loads what is not stored.
            #expect(try await setup.text("/cache/q", policy: .returnCacheElseLoad) == "q #1")
        }
    }

    @Test func aTimeToLiveCachesAResponseThatSaysNothingForThatLong() async throws {
        try await withCache { setup in
            _ = try await setup.get("/cache/ttl", ttl: .seconds(60))
            setup.clock.advance(59)
            #expect(try await setup.text("/cache/ttl", ttl: .seconds(60)) == "ttl #1")
            setup.clock.advance(2)
            #expect(try await setup.text("/cache/ttl", ttl: .seconds(60)) == "ttl #2")
            // Without a TTL such a response is not kept at all.
            _ = try await setup.get("/cache/plain")
            #expect(try await setup.text("/cache/plain") == "plain #2")
        }
    }

    @Test func aTimeToLiveCountsFromWhenTheResponseArrivedWhateverItsAgeOrDate() async throws {
        try await withCache { setup in
            // A CDN's copy, 10 minutes old when it arrives (Age: 600), cached for 3 minutes:
            // before, its age was already past the TTL, and every call went to the network.
            _ = try await setup.get("/cache/cdn?age=600", ttl: .seconds(180))
            setup.clock.advance(170)
            let cached = try await setup.get("/cache/cdn?age=600", ttl: .seconds(180))
            #expect(text(cached) == "cdn #1" && cached.attempts == 0)
            #expect(cached.headerFields[.age] == "770")  // the age it reports is still HTTP's
            setup.clock.advance(20)
            #expect(try await setup.text("/cache/cdn?age=600", ttl: .seconds(180)) == "cdn #2")
            #expect(setup.server.hits("cache-cdn") == 2)
        }
    }

    @Test func varyKeepsAnswersForOtherRequestValuesApart() async throws {
        try await withCache { setup in
            let path = "/cache/vary?maxAge=60&vary=Accept-Language"
            let finnish = try await setup.text(path, fields: [(.acceptLanguage, "fi")])
            let finnishAgain = try await setup.text(path, fields: [(.acceptLanguage, "fi")])
            let english = try await setup.text(path, fields: [(.acceptLanguage, "en")])
            #expect(finnish == "vary #1 Accept-Language=fi")
            #expect(finnishAgain == "vary #1 Accept-Language=fi")
            #expect(english == "vary #2 Accept-Language=en")
            #expect(setup.server.hits("cache-vary") == 2)
        }
    }

    @Test func aSuccessfulUnsafeRequestRemovesTheStoredResponse() async throws {
        try await withCache { setup in
            _ = try await setup.get("/cache/unsafe?maxAge=60")
            let post = Request(url: setup.server.url("/cache/unsafe?maxAge=60"), method: .post)
            _ = try await setup.cache.response(for: post) { try await setup.queue.response(for: $0) }
            #expect(try await setup.text("/cache/unsafe?maxAge=60") == "unsafe #3")
        }
    }

    @Test(arguments: ["99999999999999999999", "1e400", "inf", "-5", "00000000030"])
    func anAgeOfAnyShapeGivesACappedAgeNotACrash(_ age: String) async throws {
        try await withCache { setup in
            // Stored with that Age (before, a huge one trapped converting it to Int), then
            // answered from the store, and revalidated after a 304.
            let path = "/cache/age?maxAge=60&etag=a&age=\(age)"
            _ = try await setup.get(path)
            let cached = try await setup.get(path, policy: .returnCacheElseLoad)
            #expect(text(cached) == "age #1")
            let shown = try #require(cached.headerFields[.age].flatMap { Int($0) })
            #expect(shown == (age == "99999999999999999999" ? 1 << 31 : age == "00000000030" ? 30 : 0))
            setup.clock.advance(120)
            #expect(try await setup.text(path) == "age #1")  // stale: revalidated, 304
            #expect(setup.server.hits("cache-age") == 2)
        }
    }

    @Test func aGETWithABodyIsNotAnsweredFromTheStore() async throws {
        try await withCache { setup in
            // A search API's query in the body: the URL alone does not tell answers apart.
            for query in ["alice", "bob"] {
                var request = Request(url: setup.server.url("/cache/search?maxAge=60"))
                request.body = .bytes(Data(query.utf8))
                _ = try await setup.cache.response(for: request) { try await setup.queue.response(for: $0) }
            }
            #expect(setup.server.hits("cache-search") == 2)
        }
    }

    @Test func aResponseAfterARedirectIsNotKeptUnderTheURLThatRedirected() async throws {
        try await withCache { setup in
            // A 302 is not cacheable: the target it names may change; before, its target's
            // answer was kept under the redirecting URL for the target's max-age.
            let path = "/redirect?status=302&to=%2Fcache%2Ftarget%3FmaxAge%3D3600"
            let first = try await setup.text(path)
            let second = try await setup.text(path)
            #expect(first == "target #1")
            #expect(second == "target #2")
            #expect(setup.server.requests.filter { $0.path == "/redirect" }.count == 2)
        }
    }

    @Test func aDiskCacheAnswersAfterARestartWithNoTraffic() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try await withServer { server in
            let queue = RequestQueue()
            let first = ResponseCache(store: try DiskCacheStore(folder: folder))
            _ = try await first.response(for: Request(url: server.url("/cache/disk?maxAge=600"))) { try await queue.response(for: $0) }
            // A new process would open the folder again: a new store, a new cache.
            let second = ResponseCache(store: try DiskCacheStore(folder: folder))
            let answer = try await second.response(for: Request(url: server.url("/cache/disk?maxAge=600"))) {
                try await queue.response(for: $0)
            }
            #expect(String(decoding: answer.body, as: UTF8.self) == "disk #1")
            #expect(answer.attempts == 0)
            #expect(server.hits("cache-disk") == 1)
        }
    }

    @Test func downloadsAndErrorsAreNotCached() async throws {
        try await withCache { setup in
            _ = try await setup.get("/cache/err?maxAge=60&status=500")
            #expect(try await setup.text("/cache/err?maxAge=60&status=500") == "err #2")
            let folder = try makeTemporaryFolder()
            defer { try? FileManager.default.removeItem(at: folder) }
            var download = Request(url: setup.server.url("/cache/file?maxAge=60"))
            download.destination = folder.appendingPathComponent("file")
            for _ in 0..<2 { _ = try await setup.cache.response(for: download) { try await setup.queue.response(for: $0) } }
            #expect(setup.server.hits("cache-file") == 2)
        }
    }
}
