import CurlQueue
import CurlQueueClient
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import HTTPTypes
import Testing

/// How a call becomes a request: URL joining and refusal, query and form encoding, header
/// merging, bodies, methods, the CDN, and settings a request overrides.
@Suite struct HTTPClientRequestBuildingTests {
    let client = HTTPClient(configuration: .init(baseURL: URL(string: "https://api.example.org/v1/")!))

    @Test func pathsAreJoinedToTheBasePathWithOneSlash() throws {
        #expect(try client.url(for: "users/1").absoluteString == "https://api.example.org/v1/users/1")
        #expect(try client.url(for: "/users/1").absoluteString == "https://api.example.org/v1/users/1")
        #expect(try client.url(for: "").absoluteString == "https://api.example.org/v1")
        let bare = HTTPClient(configuration: .init(baseURL: URL(string: "http://127.0.0.1:8080")!))
        #expect(try bare.url(for: "iphone/register").absoluteString == "http://127.0.0.1:8080/iphone/register")
        #expect(try client.url(for: "v1/projects/p:run").absoluteString == "https://api.example.org/v1/v1/projects/p:run")
    }

    @Test func pathCharactersAreEncodedAndEscapesKept() throws {
        #expect(try client.url(for: "files/a b/é").absoluteString == "https://api.example.org/v1/files/a%20b/%C3%A9")
        #expect(try client.url(for: "files/a%2Fb/100%").absoluteString == "https://api.example.org/v1/files/a%2Fb/100%25")
    }

    @Test(arguments: [
        "https://evil.example/x", "http:evil.example", "//evil.example/x", "///evil", "mailto:a@b",
        "users?id=1", "users#top", "a\\b", "../admin", "users/../../x", "./x", "users/%2e%2e/x",
        "a\r\nHost: evil", "a\u{0}b",
        // Dot segments behind encoded slashes or backslashes, or with parameters, as servers
        // and proxies that decode them read them.
        "%2e%2e%2fadmin", "..%2fadmin", "files/..%2F..%2Fsecret", "a%5c..%5cb", "..;/admin", "x/%2E%2E%5C",
    ])
    func pathsThatCouldLeaveTheBaseAreRefused(path: String) {
        #expect(throws: HTTPClientError.self) { try client.url(for: path) }
        do throws(HTTPClientError) {
            _ = try client.url(for: path)
        } catch {
            guard case .invalidPath(let reported, let reason) = error else {
                Issue.record("expected invalidPath, got \(error)")
                return
            }
            #expect(reported == path)
            #expect(!reason.isEmpty)
            #expect(error.description.hasPrefix("invalid path"))
        }
    }

    @Test func aRefusedPathSendsNothing() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            await #expect(throws: HTTPClientError.self) { _ = try await client.get("http://127.0.0.1:\(server.port)/echo") }
            await #expect(throws: HTTPClientError.self) { _ = try await client.get("//127.0.0.1:\(server.port)/echo") }
            #expect(server.requests.isEmpty)
        }
    }

    @Test func queryItemsArePercentEncodedAndMayRepeat() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let echo = try await client.get("echo", query: [
                URLQueryItem(name: "q", value: "a+b&c=d e"),
                URLQueryItem(name: "q", value: "é/?#"),
                URLQueryItem(name: "flag", value: nil),
                URLQueryItem(name: "sp ace", value: ""),
            ], as: Echo.self)
            #expect(echo.uri == "/echo?q=a%2Bb%26c%3Dd%20e&q=%C3%A9%2F%3F%23&flag&sp%20ace=")
        }
    }

    @Test func theBaseURLsQueryIsKeptBeforeTheCallsItems() throws {
        let client = HTTPClient(configuration: .init(baseURL: URL(string: "https://api.example.org/v1?app=7")!))
        #expect(try client.url(for: "x", query: [URLQueryItem(name: "a", value: "1")]).absoluteString == "https://api.example.org/v1/x?app=7&a=1")
    }

    @Test func defaultHeaderFieldsAreMergedAndARequestsFieldReplacesAllOfItsName() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server) { configuration in
                configuration.headerFields = [.userAgent: "CurlQueueTests/1"]
                configuration.headerFields.append(HTTPField(name: HTTPField.Name("X-Tag")!, value: "one"))
                configuration.headerFields.append(HTTPField(name: HTTPField.Name("X-Tag")!, value: "two"))
            }
            let echo = try await client.get("echo", headerFields: [HTTPField.Name("x-tag")!: "mine"], as: Echo.self)
            #expect(echo.values("User-Agent") == ["CurlQueueTests/1"])
            #expect(echo.values("X-Tag") == ["mine"])
        }
    }

    @Test func eachMethodIsSentAsItself() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            #expect(try await client.get("echo", as: Echo.self).method == "GET")
            #expect(try await client.delete("echo", as: Echo.self).method == "DELETE")
            #expect(try await client.post("echo", as: Echo.self).method == "POST")
            #expect(try await client.put("echo", as: Echo.self).method == "PUT")
            #expect(try await client.patch("echo", as: Echo.self).method == "PATCH")
            let head = try await client.head("echo")
            #expect(head.status == .ok)
            #expect(head.body.isEmpty)
            #expect(server.requests.last?.method == "HEAD")
        }
    }

    @Test func aFormBodyIsURLEncodedLikeAnHTMLForm() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let echo = try await client.post("echo", body: .form([
                URLQueryItem(name: "user name", value: "a+b&c=d é"),
                URLQueryItem(name: "tag", value: "1"),
                URLQueryItem(name: "tag", value: "2"),
            ]), as: Echo.self)
            #expect(echo.bodyText == "user+name=a%2Bb%26c%3Dd+%C3%A9&tag=1&tag=2")
            #expect(echo.values("Content-Type") == ["application/x-www-form-urlencoded"])
        }
    }

    struct Payload: Codable, Sendable, Equatable {
        var name: String
        var admin: Bool
    }

    @Test func aJSONBodyIsEncodedWithItsContentType() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let echo = try await client.put("echo", body: .json(Payload(name: "ann", admin: true)), as: Echo.self)
            #expect(try JSONDecoder().decode(Payload.self, from: echo.bodyData) == Payload(name: "ann", admin: true))
            #expect(echo.values("Content-Type") == ["application/json"])
        }
    }

    @Test func rawBytesKeepTheCallersContentType() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let echo = try await client.patch(
                "echo", headerFields: [.contentType: "text/x-mine"], body: .bytes(Data("raw".utf8), contentType: "text/plain"),
                as: Echo.self)
            #expect(echo.bodyText == "raw")
            #expect(echo.values("Content-Type") == ["text/x-mine"])
        }
    }

    @Test func aFileBodyIsSentFromDisk() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("upload.bin")
        try Data(FixtureServer.expectedBytes(count: 70_000)).write(to: file)
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let echo = try await client.post("echo", body: .file(file, contentType: "application/octet-stream"), as: Echo.self)
            #expect(Array(echo.bodyData) == FixtureServer.expectedBytes(count: 70_000))
            #expect(echo.values("Content-Type") == ["application/octet-stream"])
        }
    }

    struct CDNCall: APIRequest {
        typealias Output = Response
        var path: String { "echo" }
        var useCDN: Bool { true }
    }

    @Test func aRequestAskingForTheCDNGoesToTheCDN() async throws {
        try await withServer { (api) async throws in
            try await withServer { (cdn) async throws in
                let client = makeClient(api) { $0.cdnURL = URL(string: cdn.baseURL)! }
                _ = try await client.send(CDNCall())
                #expect(cdn.requests.map(\.uri) == ["/echo"])
                #expect(api.requests.isEmpty)
                let noCDN = makeClient(api)
                _ = try await noCDN.send(CDNCall())
                #expect(api.requests.map(\.uri) == ["/echo"])
            }
        }
    }

    struct Quick: APIRequest {
        typealias Output = Response
        var path: String
        var limit: Duration = .seconds(20)
        var timeouts: Request.Timeouts? { Request.Timeouts(total: limit) }
        var retry: RetrySettings? { RetrySettings.none }
    }

    @Test func aRequestsTimeoutsAndRetrySettingsOverrideTheClients() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server) { configuration in
                configuration.retry = RetrySettings(autoRetry: true, policy: RetryPolicy(
                    maxAttempts: 3, initialBackoff: .milliseconds(10), retryableStatuses: [503]))
            }
            // The client's settings: the flaky route's one failure is retried.
            #expect(try await client.get("flaky/client-retry").status == .ok)
            #expect(server.hits("client-retry") == 2)
            // The request's: no retry, and a time limit the gate never meets.
            #expect(try await client.send(Quick(path: "flaky/request-retry")).status.code == 503)
            #expect(server.hits("request-retry") == 1)
            do throws(HTTPClientError) {
                _ = try await client.send(Quick(path: "gate/never", limit: .milliseconds(200)))
                Issue.record("the gate never opens")
            } catch {
                guard case .transport(.timedOut) = error else { throw error }
            }
        }
    }
}
