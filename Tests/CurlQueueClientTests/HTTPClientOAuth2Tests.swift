import CurlQueue
import CurlQueueClient
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import HTTPTypes
import Testing

/// The OAuth2 authenticator as client middleware, and trust set per client and per request.
@Suite struct HTTPClientOAuth2Tests {
    struct Token: Decodable { var access_token: String }

    @Test func concurrentCallsThatGet401ShareOneTokenRequest() async throws {
        try await withServer { server in
            let tokenURL = server.url("/auth/token/client")
            let authenticator = OAuth2Authenticator(
                covering: .host("127.0.0.1", pathPrefix: "/auth/", allowsHTTP: true),
                tokenRequest: { Request(url: tokenURL, method: .post) },
                credentials: { .init(username: "client", password: "secret") },
                parseToken: { try JSONDecoder().decode(Token.self, from: $0.body).access_token }
            )
            let client = makeClient(server, middleware: [authenticator])
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<40 {
                    group.addTask { try await client.get("auth/protected/client", query: [URLQueryItem(name: "n", value: "\(index)")]).status.code }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 200, count: 40))
            #expect(server.hits("token-client") == 1)
            // The token request went straight out: with Basic credentials, not a Bearer token.
            let tokenRequest = try #require(server.requests.first { $0.path == "/auth/token/client" })
            #expect(tokenRequest.header("authorization")?.hasPrefix("Basic ") == true)
        }
    }

    struct Secure: APIRequest {
        typealias Output = Response
        var path: String { "files/1k" }
        var tls: Request.TLSOptions?
    }

    @Test func trustIsSetPerClientAndPerRequestAndFailsClosedWithout() async throws {
        let nginx = try await NginxServer.start()
        defer { nginx.shutdown() }
        let base = URL(string: nginx.url("/").absoluteString)!
        func client(_ tls: Request.TLSOptions) -> HTTPClient {
            HTTPClient(configuration: HTTPClient.Configuration(baseURL: base, tls: tls, queue: RequestQueue()))
        }
        var trusted = Request.TLSOptions()
        trusted.caFile = nginx.caFile

        // No CA named: the untrusted certificate fails.
        let strict = client(Request.TLSOptions())
        let refused = await result { () async throws(HTTPClientError) in try await strict.send(Secure()) }
        guard case .failure(.transport(let error)) = refused, error.transportFailure?.code == .peerFailedVerification else {
            Issue.record("expected peerFailedVerification, got \(refused)")
            return
        }
        // The client's CA applies to its requests.
        let byClient = try await client(trusted).send(Secure())
        #expect(byClient.status == .ok)
        // A request's own trust wins over its client's, both ways.
        let byRequest = try await strict.send(Secure(tls: trusted))
        #expect(byRequest.status == .ok)
        let narrowed = await result { () async throws(HTTPClientError) in try await client(trusted).send(Secure(tls: Request.TLSOptions())) }
        #expect(narrowed.failure != nil)
    }
}
