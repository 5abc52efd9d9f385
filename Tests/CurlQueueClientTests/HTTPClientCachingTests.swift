import CurlQueue
@testable import CurlQueueClient
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import HTTPTypes
import Testing

/// A client with a response cache, and the three levels of time limits and cache policy
/// (process-wide default, client, request). Serialized: one test changes the process-wide
/// defaults, which only clients with a cache (here) are affected by for the cache policy.
@Suite(.serialized) struct HTTPClientCachingTests {
    struct Cached: APIRequest {
        typealias Output = Response
        var path: String
        var query: [URLQueryItem]
        var cacheTTL: Duration?
        var cachePolicy: CachePolicy?

        /// `target` is a path with an optional `?name=value&…` query.
        init(path target: String, cacheTTL: Duration? = nil, cachePolicy: CachePolicy? = nil) {
            (path, query) = split(target)
            self.cacheTTL = cacheTTL
            self.cachePolicy = cachePolicy
        }
    }

    func cachingClient(_ server: FixtureServer, policy: CachePolicy? = nil) -> HTTPClient {
        makeClient(server) { configuration in
            configuration.responseCache = ResponseCache(store: MemoryCacheStore())
            configuration.cachePolicy = policy
        }
    }

    func body(_ response: Response) -> String { String(decoding: response.body, as: UTF8.self) }

    @Test func aCachedAnswerComesBackWithNoNetworkTraffic() async throws {
        try await withServer { server in
            let client = cachingClient(server)
            let first = try await client.get("cache/c1", query: [URLQueryItem(name: "maxAge", value: "60")])
            let second = try await client.get("cache/c1", query: [URLQueryItem(name: "maxAge", value: "60")])
            #expect(body(first) == "c1 #1" && body(second) == "c1 #1")
            #expect(second.attempts == 0)
            #expect(server.hits("cache-c1") == 1)
        }
    }

    @Test func aRequestObjectsTTLCachesAResponseThatSaysNothing() async throws {
        try await withServer { server in
            let client = cachingClient(server)
            let first = try await client.send(Cached(path: "cache/ttl", cacheTTL: .seconds(180)))
            let second = try await client.send(Cached(path: "cache/ttl", cacheTTL: .seconds(180)))
            #expect(body(first) == "ttl #1" && body(second) == "ttl #1")
            // Without the TTL the same response is not kept.
            _ = try await client.send(Cached(path: "cache/ttl2"))
            let again = try await client.send(Cached(path: "cache/ttl2"))
            #expect(body(again) == "ttl2 #2")
            #expect(server.hits("cache-ttl") == 1)
        }
    }

    @Test func theCachePolicyOfTheRequestWinsOverTheClientsWhichWinsOverTheDefault() async throws {
        try await withServer { server in
            let saved = HTTPClient.defaults
            defer { HTTPClient.defaults = saved }
            HTTPClient.defaults.cachePolicy = .returnCacheDontLoad

            // Process-wide default: nothing stored, nothing sent.
            let byDefault = cachingClient(server)
            let miss = await result { () async throws(HTTPClientError) in try await byDefault.send(Cached(path: "cache/levels?maxAge=60")) }
            guard case .failure(.notCached) = miss else {
                Issue.record("expected notCached, got \(miss)")
                return
            }
            #expect(server.hits("cache-levels") == 0)

            // The client's policy wins over the default: it loads even though its cache is fresh.
            let reloading = cachingClient(server, policy: .reloadIgnoringCache)
            _ = try await reloading.send(Cached(path: "cache/levels?maxAge=60"))
            let reloaded = try await reloading.send(Cached(path: "cache/levels?maxAge=60"))
            #expect(body(reloaded) == "levels #2")
            #expect(server.hits("cache-levels") == 2)

            // The request's policy wins over the client's: answered from the cache.
            let answer = try await reloading.send(Cached(path: "cache/levels?maxAge=60", cachePolicy: .returnCacheDontLoad))
            #expect(body(answer) == "levels #2" && answer.attempts == 0)
            #expect(server.hits("cache-levels") == 2)
        }
    }

    struct Timed: APIRequest {
        typealias Output = Response
        var path: String
        var query: [URLQueryItem]
        var timeouts: Request.Timeouts?

        init(path target: String, timeouts: Request.Timeouts? = nil) {
            (path, query) = split(target)
            self.timeouts = timeouts
        }
    }

    @Test func timeLimitsComeFromTheMostSpecificLevel() async throws {
        try await withServer { server in
            let saved = HTTPClient.defaults
            defer { HTTPClient.defaults = saved }
            // A value no other test notices: a 29 s connect limit.
            HTTPClient.defaults.timeouts = Request.Timeouts(connect: .seconds(29))
            let plain = makeClient(server)
            let fromDefault = try plain.makeRequest(for: Timed(path: "x")).timeouts
            #expect(fromDefault == Request.Timeouts(connect: .seconds(29)))
            let client = makeClient(server) { $0.timeouts = Request.Timeouts(connect: .seconds(5), total: .seconds(20)) }
            let fromClient = try client.makeRequest(for: Timed(path: "x")).timeouts
            #expect(fromClient == Request.Timeouts(connect: .seconds(5), total: .seconds(20)))
            let own = Timed(path: "x", timeouts: Request.Timeouts(total: .milliseconds(300)))
            let fromRequest = try client.makeRequest(for: own).timeouts
            #expect(fromRequest == Request.Timeouts(total: .milliseconds(300)))

            // And the request's limit is the one the transfer runs with: a stalled body ends
            // at 300 ms although the client allows 20 s.
            let stalled = await result { () async throws(HTTPClientError) in
                try await client.send(Timed(path: "bytes/100000?stallAfter=10", timeouts: Request.Timeouts(total: .milliseconds(300))))
            }
            guard case .failure(.transport(.timedOut)) = stalled else {
                Issue.record("expected a timeout, got \(stalled)")
                return
            }
        }
    }
}

/// A path and its query items, from `path?name=value&…`.
private func split(_ target: String) -> (String, [URLQueryItem]) {
    guard let mark = target.firstIndex(of: "?") else { return (target, []) }
    let items = target[target.index(after: mark)...].split(separator: "&").map { pair in
        let parts = pair.split(separator: "=", maxSplits: 1)
        return URLQueryItem(name: String(parts[0]), value: parts.count > 1 ? String(parts[1]) : nil)
    }
    return (String(target[..<mark]), items)
}
