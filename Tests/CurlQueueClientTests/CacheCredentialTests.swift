import CurlQueue
import CurlQueueClient
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import HTTPTypes
import Testing

/// A response cache used by several users: clients with different credentials over one real
/// store (memory and disk), against the fixture's `/cache/ID` route, which counts what reaches
/// the server (`cache-ID`) and numbers its bodies (`ID #N`).
@Suite struct CacheCredentialTests {
    enum StoreKind: String, CaseIterable, CustomTestStringConvertible {
        case memory, disk
        var testDescription: String { rawValue }
    }

    /// A store of `kind` (a disk store in a new folder, removed afterwards) for `body`.
    func withStore(_ kind: StoreKind, _ body: (any ResponseCacheStore, URL?) async throws -> Void) async throws {
        switch kind {
        case .memory:
            try await body(MemoryCacheStore(), nil)
        case .disk:
            let folder = try makeTemporaryFolder()
            defer { try? FileManager.default.removeItem(at: folder) }
            try await body(try DiskCacheStore(folder: folder.appendingPathComponent("cache")), folder.appendingPathComponent("cache"))
        }
    }

    /// A client of its own (its own queue and `ResponseCache`) over the shared `store`.
    func client(_ server: FixtureServer, store: any ResponseCacheStore, token: String?) -> HTTPClient {
        makeClient(server, middleware: token.map { [TokenAuthMiddleware.bearer($0)] } ?? []) { configuration in
            configuration.responseCache = ResponseCache(store: store)
            // Set here: HTTPClientCachingTests changes the process-wide default while it runs.
            configuration.cachePolicy = .useProtocolCachePolicy
        }
    }

    func text(_ response: Response) -> String { String(decoding: response.body, as: UTF8.self) }

    func query(_ text: String) -> [URLQueryItem] {
        text.split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1)
            return URLQueryItem(name: String(parts[0]), value: parts.count > 1 ? String(parts[1]) : nil)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func alicesPrivateResponseIsNotServedToBobNorToAnAnonymousClient(_ kind: StoreKind) async throws {
        try await withStore(kind) { store, _ in
            try await withServer { server in
                let alice = client(server, store: store, token: "ALICE")
                let bob = client(server, store: store, token: "BOB")
                let anonymous = client(server, store: store, token: nil)
                let items = query("cc=private, max-age=600")
                let forAlice = try await alice.get("cache/private", query: items)
                // Before: both got "private #1", Alice's, with no request to the server.
                let forBob = try await bob.get("cache/private", query: items)
                let forAnonymous = try await anonymous.get("cache/private", query: items)
                #expect(text(forAlice) == "private #1" && forAlice.attempts == 1)
                #expect(text(forBob) == "private #2" && forBob.attempts == 1)
                #expect(text(forAnonymous) == "private #3" && forAnonymous.attempts == 1)
                let seen = server.requests.filter { $0.path == "/cache/private" }.map { $0.header("authorization") }
                #expect(seen == ["Bearer ALICE", "Bearer BOB", nil])
                // Each one's second request is answered from their own entry.
                let bobAgain = try await bob.get("cache/private", query: items)
                let aliceAgain = try await alice.get("cache/private", query: items)
                #expect(text(bobAgain) == "private #2" && bobAgain.attempts == 0)
                #expect(text(aliceAgain) == "private #1" && aliceAgain.attempts == 0)
                #expect(server.hits("cache-private") == 3)
            }
        }
    }

    @Test func aTokenThatChangesThroughOAuth2IsAMiss() async throws {
        try await withServer { server in
            struct Token: Decodable { var access_token: String }
            let tokenURL = server.url("/auth/token/cached")
            func authenticator() -> OAuth2Authenticator {
                OAuth2Authenticator(
                    covering: .host("127.0.0.1", pathPrefix: "/auth/", allowsHTTP: true),
                    tokenRequest: { Request(url: tokenURL, method: .post) },
                    credentials: { .init(username: "client", password: "secret") },
                    parseToken: { try JSONDecoder().decode(Token.self, from: $0.body).access_token })
            }
            let oauth = authenticator()
            let client = makeClient(server, middleware: [oauth]) { configuration in
                configuration.responseCache = ResponseCache(store: MemoryCacheStore())
                configuration.cachePolicy = .useProtocolCachePolicy  // not the default another suite changes
            }
            let items = query("cc=private, max-age=600")
            // A 401, the token cached-1, the 200 (stored for cached-1); then from the store.
            _ = try await client.get("auth/protected/cached", query: items)
            let cached = try await client.get("auth/protected/cached", query: items)
            #expect(cached.attempts == 0 && server.hits("protected-cached") == 2)
            #expect(oauth.currentToken == "cached-1")
            // The token changes: another client takes cached-2 (which expires cached-1), and this
            // client's next uncached call gets a 401 and takes cached-3.
            _ = try await makeClient(server, middleware: [authenticator()]).get("auth/protected/cached")
            _ = try await client.get("auth/protected/cached", query: [URLQueryItem(name: "other", value: "1")])
            #expect(oauth.currentToken == "cached-3")
            let hitsBefore = server.hits("protected-cached")
            // Before: answered from cached-1's entry, with no request.
            let afterChange = try await client.get("auth/protected/cached", query: items)
            #expect(afterChange.status == .ok && afterChange.attempts == 1)
            #expect(server.hits("protected-cached") == hitsBefore + 1)
            #expect(server.requests.last { $0.path == "/auth/protected/cached" }?.header("authorization") == "Bearer cached-3")
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aSetCookieIsNeverReplayed(_ kind: StoreKind) async throws {
        try await withStore(kind) { store, _ in
            try await withServer { server in
                let cache = ResponseCache(store: store)
                let queue = RequestQueue()
                func get(_ path: String, ttl: Duration? = nil) async throws -> Response {
                    try await cache.response(for: Request(url: server.url(path)), timeToLive: ttl) { try await queue.response(for: $0) }
                }
                // With max-age, and with a cache TTL: neither keeps a response that sets a cookie.
                for (path, ttl) in [("/cache/cookie?maxAge=600&setCookie=sid%3Dalice", nil), ("/cache/cookie2?setCookie=sid%3Dalice", Duration.seconds(600))] {
                    let first = try await get(path, ttl: ttl)
                    #expect(first.headerFields[.setCookie] != nil)  // the caller gets it, once
                    let second = try await get(path, ttl: ttl)
                    // Before: the second came from the store, with the first one's Set-Cookie.
                    #expect(second.attempts == 1)
                }
                #expect(server.hits("cache-cookie") == 2 && server.hits("cache-cookie2") == 2)
            }
        }
    }

    @Test func theDiskHoldsNoCredentialInClearAndItsFilesAreTheOwnersOnly() async throws {
        try await withStore(.disk) { store, folder in
            try await withServer { server in
                let cache = ResponseCache(store: store)
                let queue = RequestQueue()
                // The credentials in a field the response's Vary names, and in the URL.
                var request = Request(url: server.url("/cache/secret?maxAge=600&vary=Authorization&quietVary=1"))
                request.headerFields[.authorization] = "Bearer SECRET-TOKEN-ALICE"
                request.headerFields[.cookie] = "session=SECRET-COOKIE"
                _ = try await cache.response(for: request) { try await queue.response(for: $0) }
                var userinfo = URLComponents(url: server.url("/cache/userinfo?maxAge=600"), resolvingAgainstBaseURL: false)!
                userinfo.user = "alice"
                userinfo.password = "SECRET-PASSWORD"
                _ = try await cache.response(for: Request(url: userinfo.url!)) { try await queue.response(for: $0) }
                let again = try await cache.response(for: request) { try await queue.response(for: $0) }
                #expect(again.attempts == 0)
                let folder = try #require(folder)
                let names = try FileManager.default.contentsOfDirectory(atPath: folder.path)
                #expect(names.count >= 2)
                for name in names {
                    let path = folder.appendingPathComponent(name).path
                    let bytes = try #require(FileManager.default.contents(atPath: path))
                    let text = String(decoding: bytes, as: UTF8.self)
                    // Before: the Vary'd Authorization and the URL's password were in the files.
                    for secret in ["SECRET-TOKEN-ALICE", "SECRET-COOKIE", "SECRET-PASSWORD"] {
                        #expect(!text.contains(secret) && !name.contains(secret), "\(secret) in \(name)")
                    }
                    let mode = try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
                    #expect(mode & 0o077 == 0, "\(name) is \(String(mode, radix: 8))")
                }
            }
        }
    }

    @Test func varyOnAcceptLanguageAndVaryStarEvenWithATTL() async throws {
        try await withServer { server in
            let cache = ResponseCache(store: MemoryCacheStore())
            let queue = RequestQueue()
            func get(_ path: String, language: String? = nil, ttl: Duration? = nil) async throws -> Response {
                var request = Request(url: server.url(path))
                if let language { request.headerFields[.acceptLanguage] = language }
                return try await cache.response(for: request, timeToLive: ttl) { try await queue.response(for: $0) }
            }
            let path = "/cache/lang?maxAge=600&vary=Accept-Language"
            #expect(text(try await get(path, language: "fi")) == "lang #1 Accept-Language=fi")
            #expect(text(try await get(path, language: "en")) == "lang #2 Accept-Language=en")
            #expect(text(try await get(path, language: "en")) == "lang #2 Accept-Language=en")
            #expect(text(try await get(path)) == "lang #3 Accept-Language=")
            #expect(server.hits("cache-lang") == 3)
            // Vary: * matches no later request, a TTL or not.
            for _ in 0..<2 { _ = try await get("/cache/star?maxAge=600&vary=*", ttl: .seconds(600)) }
            #expect(server.hits("cache-star") == 2)
        }
    }

    @Test func noStoreInTheRequestOrTheResponseWinsOverATTL() async throws {
        try await withServer { server in
            let cache = ResponseCache(store: MemoryCacheStore())
            let queue = RequestQueue()
            var request = Request(url: server.url("/cache/reqnostore?maxAge=600"))
            request.headerFields[.cacheControl] = "no-store"
            for _ in 0..<2 { _ = try await cache.response(for: request, timeToLive: .seconds(600)) { try await queue.response(for: $0) } }
            let response = Request(url: server.url("/cache/respnostore?cc=no-store"))
            for _ in 0..<2 { _ = try await cache.response(for: response, timeToLive: .seconds(600)) { try await queue.response(for: $0) } }
            #expect(server.hits("cache-reqnostore") == 2 && server.hits("cache-respnostore") == 2)
        }
    }
}
