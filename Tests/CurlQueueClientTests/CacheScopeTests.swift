import CurlQueue
@testable import CurlQueueClient
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import HTTPTypes
import Testing

/// A shared cache's rules (RFC 9111 §3, §3.5), an old disk entry, and the keyed hash that
/// partitions entries by credentials.
@Suite struct CacheScopeTests {
    func text(_ response: Response) -> String { String(decoding: response.body, as: UTF8.self) }

    func get(_ cache: ResponseCache, _ queue: RequestQueue, _ url: URL, token: String? = nil, ttl: Duration? = nil) async throws -> Response {
        var request = Request(url: url)
        if let token { request.headerFields[.authorization] = "Bearer \(token)" }
        return try await cache.response(for: request, timeToLive: ttl) { try await queue.response(for: $0) }
    }

    @Test func aSharedCacheRefusesPrivateAndAuthorizedResponsesUnlessTheySayOtherwise() async throws {
        try await withServer { server in
            let cache = ResponseCache(store: MemoryCacheStore(), scope: .shared)
            let queue = RequestQueue()
            // `private`, a TTL or not, with credentials or not: never stored.
            for _ in 0..<2 { _ = try await get(cache, queue, server.url("/cache/sp?cc=private,max-age=600"), ttl: .seconds(600)) }
            for _ in 0..<2 { _ = try await get(cache, queue, server.url("/cache/sp2?cc=private,max-age=600"), token: "ALICE") }
            // A response to a request with Authorization that says nothing more: not stored.
            for _ in 0..<2 { _ = try await get(cache, queue, server.url("/cache/sa?maxAge=600"), token: "ALICE", ttl: .seconds(600)) }
            #expect(server.hits("cache-sp") == 2 && server.hits("cache-sp2") == 2 && server.hits("cache-sa") == 2)
            // `public`: stored, and still for Alice only.
            let url = server.url("/cache/spub?cc=public,max-age=600")
            _ = try await get(cache, queue, url, token: "ALICE")
            #expect(try await get(cache, queue, url, token: "ALICE").attempts == 0)
            #expect(text(try await get(cache, queue, url, token: "BOB")) == "spub #2")
            #expect(text(try await get(cache, queue, url)) == "spub #3")
            // An anonymous response with no `private` is stored as in a private cache.
            _ = try await get(cache, queue, server.url("/cache/sanon?maxAge=600"))
            #expect(try await get(cache, queue, server.url("/cache/sanon?maxAge=600")).attempts == 0)
        }
    }

    @Test func aPrivateCacheKeepsPrivateResponsesPerUser() async throws {
        try await withServer { server in
            let cache = ResponseCache(store: MemoryCacheStore())
            let queue = RequestQueue()
            let url = server.url("/cache/pp?cc=private,max-age=600")
            _ = try await get(cache, queue, url, token: "ALICE")
            #expect(try await get(cache, queue, url, token: "ALICE").attempts == 0)
            #expect(try await get(cache, queue, url, token: "BOB").attempts == 1)
        }
    }

    @Test func aNotModifiedThatSaysPrivateToASharedCacheOrSetsACookieIsNotStored() async throws {
        try await withServer { server in
            let clock = ResponseCacheTests.TestClock()
            let cache = ResponseCache(store: MemoryCacheStore(), scope: .shared, now: { clock.now })
            let queue = RequestQueue()
            // A 304 with `private`: the caller gets the stored body; the entry goes.
            let url = server.url("/cache/r304?maxAge=10&etag=v&cc304=private")
            _ = try await get(cache, queue, url)
            clock.advance(11)
            #expect(text(try await get(cache, queue, url)) == "r304 #1")
            #expect(text(try await get(cache, queue, url)) == "r304 #2")
            #expect(server.hits("cache-r304") == 3)
            // A 304 with a cookie: the caller gets it; the entry does not keep it.
            let cookie = server.url("/cache/c304?maxAge=10&etag=v&setCookie304=sid%3D1")
            _ = try await get(cache, queue, cookie)
            clock.advance(11)
            let revalidated = try await get(cache, queue, cookie)
            #expect(revalidated.attempts == 1 && revalidated.headerFields[.setCookie] != nil)
            let fromStore = try await get(cache, queue, cookie)
            #expect(fromStore.attempts == 0 && fromStore.headerFields[.setCookie] == nil)
        }
    }

    @Test func sMaxageIsTheSharedCachesFreshness() {
        var fields = HTTPFields()
        fields[.cacheControl] = "max-age=10, s-maxage=100"
        let entry = CachedResponse(status: .ok, headerFields: fields, body: Data(), requestedAt: Date(), receivedAt: Date())
        #expect(CacheRules.freshnessLifetime(entry, scope: .shared) == 100)
        #expect(CacheRules.freshnessLifetime(entry, scope: .private) == 10)
    }

    @Test func aCallerDeclaredCredentialFieldPartitionsToo() async throws {
        try await withServer { server in
            let cache = ResponseCache(store: MemoryCacheStore(), credentialFields: [HTTPField.Name("X-API-Key")!])
            let queue = RequestQueue()
            func get(_ key: String) async throws -> Response {
                var request = Request(url: server.url("/cache/apikey?maxAge=600"))
                request.headerFields[HTTPField.Name("X-API-Key")!] = key
                return try await cache.response(for: request) { try await queue.response(for: $0) }
            }
            _ = try await get("alice-key")
            #expect(try await get("alice-key").attempts == 0)
            #expect(text(try await get("bob-key")) == "apikey #2")
        }
    }

    @Test func aDiskEntryOfTheOldFormatIsAMissAndIsRemoved() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try DiskCacheStore(folder: folder)
        let entry = CachedResponse(status: .ok, headerFields: [:], body: Data("old".utf8), requestedAt: Date(), receivedAt: Date())
        store.store(entry, forKey: "GET http://127.0.0.1/old")
        let path = folder.appendingPathComponent(DiskCacheStore.fileName(for: "GET http://127.0.0.1/old")).path
        // The same entry, digest and all, with version 2's magic.
        var data = try #require(FileManager.default.contents(atPath: path))
        data.replaceSubrange(0..<9, with: Data("CQCACHE2 ".utf8))
        try data.write(to: URL(fileURLWithPath: path))
        let reopened = try DiskCacheStore(folder: folder)
        #expect(reopened.cachedResponse(forKey: "GET http://127.0.0.1/old") == nil)
        #expect(!FileManager.default.fileExists(atPath: path))
        // The secret survives the reopening, so entries stored for credentials do too.
        #expect(reopened.partitionSecret == store.partitionSecret && store.partitionSecret.count == 32)
    }

    @Test func theKeyedHashIsHMACSHA256() {
        // RFC 4231, test case 2.
        #expect(SHA256.hmacHex(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8))
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        // Test case 6: a key longer than the block is hashed first.
        #expect(SHA256.hmacHex(key: [UInt8](repeating: 0xaa, count: 131),
                               message: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8))
                == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
    }
}
