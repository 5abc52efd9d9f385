import CurlQueue
import CurlQueueClient
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import HTTPTypes
import Testing

/// Records its name on the way out and on the way back.
struct Tracer: HTTPClientMiddleware {
    let name: String
    let trace: LockedBox<[String]>
    func intercept(_ request: Request, next: (Request) async throws -> Response) async throws -> Response {
        trace.update { $0.append("\(name) out") }
        let response = try await next(request)
        trace.update { $0.append("\(name) back") }
        return response
    }
}

/// YTKNetwork's URL filter: common query parameters on every request.
struct CommonParameters: HTTPClientMiddleware {
    func intercept(_ request: Request, next: (Request) async throws -> Response) async throws -> Response {
        var request = request
        var components = URLComponents(url: request.url, resolvingAgainstBaseURL: false)!
        components.percentEncodedQuery = [components.percentEncodedQuery, "app=7&version=1.2"].compactMap { $0 }.joined(separator: "&")
        request.url = components.url!
        return try await next(request)
    }
}

/// Retries once when the response is a 503.
struct RetryOn503: HTTPClientMiddleware {
    func intercept(_ request: Request, next: (Request) async throws -> Response) async throws -> Response {
        let response = try await next(request)
        guard response.status.code == 503 else { return response }
        return try await next(request)
    }
}

struct Refuse: HTTPClientMiddleware, Error {
    func intercept(_ request: Request, next: (Request) async throws -> Response) async throws -> Response {
        throw self
    }
}

/// The middleware stack: order out and back, rewriting, answering alone, retrying, errors,
/// and each built-in middleware against /echo.
@Suite struct HTTPClientMiddlewareTests {
    @Test func requestsGoOutInStackOrderAndResponsesComeBackInReverse() async throws {
        try await withServer { (server) async throws in
            let trace = LockedBox<[String]>([])
            let client = makeClient(server, middleware: [Tracer(name: "A", trace: trace), Tracer(name: "B", trace: trace), Tracer(name: "C", trace: trace)])
            _ = try await client.get("echo")
            #expect(trace.value == ["A out", "B out", "C out", "C back", "B back", "A back"])
        }
    }

    @Test func aMiddlewareMayRewriteTheRequest() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server, middleware: [CommonParameters()])
            let echo = try await client.get("echo", query: [URLQueryItem(name: "q", value: "1")], as: Echo.self)
            #expect(echo.uri == "/echo?q=1&app=7&version=1.2")
        }
    }

    struct ShortCircuit: HTTPClientMiddleware {
        let answer: Response
        func intercept(_ request: Request, next: (Request) async throws -> Response) async throws -> Response { answer }
    }

    @Test func aMiddlewareMayAnswerAloneAndNothingIsSent() async throws {
        try await withServer { (server) async throws in
            // A real response to reuse as the cached answer.
            let cached = try await makeClient(server).get("json", query: [URLQueryItem(name: "body", value: userJSON)])
            server.resetStatistics()
            let trace = LockedBox<[String]>([])
            let client = makeClient(server, middleware: [Tracer(name: "A", trace: trace), ShortCircuit(answer: cached), Tracer(name: "C", trace: trace)])
            #expect(try await client.get("users/1", as: User.self) == User(nick: "ann", level: 3))
            #expect(trace.value == ["A out", "A back"])
            #expect(server.requests.isEmpty)
        }
    }

    @Test func aMiddlewareMayRetryByCallingNextAgain() async throws {
        try await withServer { (server) async throws in
            let trace = LockedBox<[String]>([])
            let client = makeClient(server, middleware: [RetryOn503(), Tracer(name: "inner", trace: trace)])
            #expect(try await client.get("flaky/mw", query: [URLQueryItem(name: "failures", value: "1")]).status == .ok)
            #expect(server.hits("mw") == 2)
            #expect(trace.value == ["inner out", "inner back", "inner out", "inner back"])
        }
    }

    @Test func aMiddlewaresOwnErrorEndsTheCall() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server, middleware: [Refuse()])
            do throws(HTTPClientError) {
                _ = try await client.get("echo")
                Issue.record("the middleware refuses")
            } catch {
                guard case .middleware(let inner) = error else { throw error }
                #expect(inner is Refuse)
            }
            #expect(server.requests.isEmpty)
        }
    }

    @Test func jsonMiddlewareLabelsRequestsAndCanRequireJSONResponses() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server, middleware: [JSONMiddleware()])
            let echo = try await client.post("echo", body: .bytes(Data("{}".utf8)), as: Echo.self)
            #expect(echo.values("Accept") == ["application/json"])
            #expect(echo.values("Content-Type") == ["application/json"])
            let own = try await client.get("echo", headerFields: [.accept: "text/csv"], as: Echo.self)
            #expect(own.values("Accept") == ["text/csv"])
            #expect(own.values("Content-Type").isEmpty)

            let strict = makeClient(server, middleware: [JSONMiddleware(requireJSONResponse: true)])
            #expect(try await strict.get("json", query: [URLQueryItem(name: "body", value: userJSON)], as: User.self).nick == "ann")
            do throws(HTTPClientError) {
                _ = try await strict.get("status/200", as: User.self)
                Issue.record("text/plain is not JSON")
            } catch {
                guard case .decoding(_, let message) = error else { throw error }
                #expect(message.contains("text/plain"))
            }
        }
    }

    @Test func basicAuthSendsBase64OfUserAndPasswordUnlessTheRequestHasItsOwn() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server, middleware: [BasicAuthMiddleware(username: "login", password: "pass")])
            #expect(try await client.get("echo", as: Echo.self).values("Authorization") == ["Basic bG9naW46cGFzcw=="])
            let own = try await client.get("echo", headerFields: [.authorization: "Bearer mine"], as: Echo.self)
            #expect(own.values("Authorization") == ["Bearer mine"])
        }
    }

    @Test func tokenAuthSendsFaradaysTokenFormAndBearer() async throws {
        try await withServer { (server) async throws in
            let token = makeClient(server, middleware: [TokenAuthMiddleware(token: "abc", options: ["foo": "bar", "q": #"a"b"#])])
            #expect(try await token.get("echo", as: Echo.self).values("Authorization") == [#"Token token="abc", foo="bar", q="a\"b""#])
            let bearer = makeClient(server, middleware: [TokenAuthMiddleware.bearer("xyz")])
            #expect(try await bearer.get("echo", as: Echo.self).values("Authorization") == ["Bearer xyz"])
        }
    }
}
