import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import HTTPTypes
import Testing

/// The header fields a caller set do not follow a redirect to another origin (scheme, host,
/// port): libcurl dropped only `Authorization` and `Cookie`, and sent an `X-Api-Key`, a
/// `Proxy-Authorization` or any token field to whatever server the redirect named. Two fixture
/// servers on two ports are two origins.
@Suite struct RedirectFieldsTests {
    static let statuses = [301, 302, 303, 307, 308]
    static let methods: [HTTPRequest.Method] = [.get, .post]

    /// The caller's fields that must not cross, and one that may.
    static let secrets: [(String, String)] = [
        ("X-Api-Key", "key-1"), ("Proxy-Authorization", "Basic cHJveHk6c2VjcmV0"),
        ("X-Auth-Token", "token-2"), ("X-My-Session", "session-3"), ("Authorization", "Bearer t4"),
    ]

    func request(to url: URL, _ method: HTTPRequest.Method) -> Request {
        var request = Request(url: url)
        request.method = method
        if method == .post { request.body = .bytes(Data("payload".utf8)) }
        for (name, value) in Self.secrets { request.addHeader(name, value) }
        request.addHeader("Accept", "application/json")
        return request
    }

    /// `/redirect` on `server` to `target` with `status`.
    func redirect(_ server: FixtureServer, to target: URL, status: Int) -> URL {
        let encoded = target.absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        return server.url("/redirect?to=\(encoded)&status=\(status)")
    }

    /// The method the target should see after `status`, as libcurl follows it.
    func methodAfter(_ status: Int, _ method: HTTPRequest.Method) -> String {
        status == 307 || status == 308 ? method.rawValue : "GET"
    }

    @Test(arguments: statuses, methods)
    func theCallersFieldsDoNotFollowARedirectToAnotherOrigin(_ status: Int, _ method: HTTPRequest.Method) async throws {
        try await withServer { server in
            try await withServer { other in
                let response = try await RequestOperation(request: request(to: redirect(server, to: other.url("/echo"), status: status), method)).response()
                #expect(response.status == .ok)
                #expect(response.effectiveURL == other.url("/echo"))
                #expect(response.metrics.redirectCount == 1)
                let first = try #require(server.requests.first)
                let second = try #require(other.requests.first)
                #expect(other.requests.count == 1)
                for (name, value) in Self.secrets {
                    #expect(first.header(name) == value, "\(name) to the first server")
                    #expect(second.header(name) == nil, "\(name) reached the other origin after \(status)")
                }
                #expect(second.header("Accept") == "application/json")
                #expect(second.method == methodAfter(status, method))
                #expect(second.bodyLength == (second.method == "POST" ? 7 : 0))
            }
        }
    }

    @Test(arguments: statuses, methods)
    func aRedirectWithinTheOriginKeepsTheFields(_ status: Int, _ method: HTTPRequest.Method) async throws {
        try await withServer { server in
            let response = try await RequestOperation(request: request(to: server.url("/redirect?to=%2Fecho&status=\(status)"), method)).response()
            #expect(response.status == .ok)
            #expect(response.metrics.redirectCount == 1)
            let second = try #require(server.requests.last)
            #expect(second.path == "/echo")
            for (name, value) in Self.secrets {
                #expect(second.header(name) == value, "\(name) after \(status)")
            }
            #expect(second.method == methodAfter(status, method))
        }
    }

    /// Another port of the same host is another origin.
    @Test func anotherPortIsAnotherOrigin() async throws {
        try await withServer { server in
            try await withServer { other in
                #expect(server.url("/").host == other.url("/").host)
                _ = try await RequestOperation(request: request(to: redirect(server, to: other.url("/echo"), status: 302), .get)).response()
                #expect(other.requests.first?.header("X-Api-Key") == nil)
            }
        }
    }

    @Test func namedFieldsMayCrossWhenTheRequestSaysSo() async throws {
        try await withServer { server in
            try await withServer { other in
                var request = request(to: redirect(server, to: other.url("/echo"), status: 307), .post)
                request.fieldsAllowedAcrossOrigins = [HTTPField.Name("X-Api-Key")!]
                _ = try await RequestOperation(request: request).response()
                let second = try #require(other.requests.first)
                #expect(second.header("X-Api-Key") == "key-1")
                #expect(second.header("X-Auth-Token") == nil)
                #expect(second.header("Proxy-Authorization") == nil)
            }
        }
    }

    /// Fields dropped when the chain left the origin do not come back when it returns there:
    /// the other server chose where to send the request.
    @Test func fieldsDroppedOnceStayDropped() async throws {
        try await withServer { server in
            try await withServer { other in
                let back = redirect(other, to: server.url("/echo?back=1"), status: 302)
                let response = try await RequestOperation(request: request(to: redirect(server, to: back, status: 302), .get)).response()
                #expect(response.metrics.redirectCount == 2)
                let last = try #require(server.requests.last)
                #expect(last.uri.contains("back=1"))
                #expect(last.header("X-Api-Key") == nil)
            }
        }
    }

    /// The limit and the scheme rules hold for the redirects followed hop by hop.
    @Test func aLoopStopsAtTheLimitAndASchemeNotAllowedIsRefused() async throws {
        try await withServer { server in
            var looping = request(to: server.url("/redirect-loop"), .get)
            looping.redirectPolicy = .follow(max: 5)
            let loop = await completion(of: RequestOperation(request: looping))
            #expect(transportCode(of: loop) == .tooManyRedirects, "\(loop)")
            #expect(server.requests.count == 6)
            let toFile = await completion(of: RequestOperation(request: request(to: server.url("/redirect?to=file%3A%2F%2F%2Fetc%2Fpasswd"), .get)))
            #expect(transportCode(of: toFile) == .unsupportedProtocol, "\(toFile)")
        }
    }

    @Test func aDownloadThroughARedirectToAnotherOriginEndsWithTheFile() async throws {
        try await withServer { server in
            try await withServer { other in
                let folder = try makeTemporaryFolder()
                defer { try? FileManager.default.removeItem(at: folder) }
                let destination = folder.appendingPathComponent("file")
                var request = request(to: redirect(server, to: other.url("/bytes/3000"), status: 302), .get)
                request.destination = destination
                let operation = RequestOperation(request: request)
                let response = try await operation.response()
                #expect(response.fileURL == destination)
                #expect(try Data(contentsOf: destination) == Data(FixtureServer.expectedBytes(count: 3000)))
                #expect(!FileManager.default.fileExists(atPath: destination.path + ".part"))
                #expect(other.requests.first?.header("X-Api-Key") == nil)
            }
        }
    }
}
