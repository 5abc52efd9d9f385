import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import HTTPTypes
import Testing

/// Bad input arrives as a clear error through the completion handler: no crash, no hang,
/// nothing sent.
@Suite struct BadInputTests {
    func expectInvalid(_ request: Request, containing text: String, sourceLocation: SourceLocation = #_sourceLocation) async {
        let result = await completion(of: RequestOperation(request: request))
        guard case .failure(.invalidRequest(let reason)) = result else {
            Issue.record("expected invalidRequest, got \(result)", sourceLocation: sourceLocation)
            return
        }
        #expect(reason.contains(text), "\(reason)", sourceLocation: sourceLocation)
    }

    @Test(arguments: ["http://[::1", "", "http://exa mple.com/%", "ht tp://x"])
    func malformedURLStrings(string: String) async {
        let result = await completion(of: RequestOperation(request: Request(string: string)))
        guard case .failure(.invalidRequest) = result else {
            Issue.record("expected invalidRequest for \(string.debugDescription), got \(result)")
            return
        }
    }

    @Test func aURLWithoutAHostIsMalformed() async {
        let result = await completion(of: RequestOperation(request: Request(url: URL(string: "http://")!)))
        guard case .failure(.invalidRequest) = result else {
            Issue.record("expected invalidRequest, got \(result)")
            return
        }
    }

    @Test(arguments: ["ftp://127.0.0.1/file", "file:///etc/passwd", "gopher://127.0.0.1/", "dict://127.0.0.1/"])
    func schemesOtherThanHTTPAreRefused(url: String) async {
        await expectInvalid(Request(url: URL(string: url)!), containing: "not allowed")
    }

    /// The allowed schemes are matched without regard to case, for the default set (which the
    /// engine recognises by identity) as for a set of one's own, equal to it or not.
    @Test func schemesAreMatchedWithoutRegardToCase() async throws {
        try await withServer { server in
            let url = server.url("/bytes/10").absoluteString
            let upper = "HTTP" + url.dropFirst("http".count)
            for schemes in [nil, Set(["https", "http"]), Set(["HTTP"])] as [Set<String>?] {
                for string in [url, upper] {
                    var request = Request(string: string)
                    if let schemes { request.allowedSchemes = schemes }
                    let result = await completion(of: RequestOperation(request: request))
                    #expect((try? result.get())?.status == .ok, "\(string) with \(schemes.map { "\($0)" } ?? "the default schemes"): \(result)")
                }
            }
            for schemes in [Set(["https"]), Set(["HTTPS", "ftp"])] {
                for string in [url, upper] {
                    var request = Request(string: string)
                    request.allowedSchemes = schemes
                    await expectInvalid(request, containing: "not allowed")
                }
            }
        }
    }

    @Test func headerValuesWithLineBreaksOrNULAreRefused() async throws {
        try await withServer { server in
            for value in ["a\r\nInjected: yes", "a\nb", "a\rb", "a\u{0}b"] {
                var request = Request(url: server.url("/echo"))
                request.addHeader("X-Test", value)
                await expectInvalid(request, containing: "X-Test")
            }
            #expect(server.requests.isEmpty)
        }
    }

    @Test func invalidHeaderNamesAreRefused() async throws {
        try await withServer { server in
            for name in ["Bad Name", "", "a:b", "x\r\ny"] {
                var request = Request(url: server.url("/echo"))
                request.addHeader(name, "v")
                await expectInvalid(request, containing: "header name")
            }
            #expect(server.requests.isEmpty)
        }
    }

    @Test func httpFieldsCannotSmuggleLineBreaks() async throws {
        try await withServer { server in
            var request = Request(url: server.url("/echo"))
            request.headerFields.append(HTTPField(name: HTTPField.Name("X-Smuggle")!, value: "a\r\nInjected: yes"))
            _ = try await RequestOperation(request: request).response()
            #expect(server.requests.last?.header("Injected") == nil)
        }
    }

    @Test func aMissingBodyFileIsRefused() async throws {
        try await withServer { server in
            let file = URL(fileURLWithPath: "/nonexistent-\(UUID().uuidString)")
            await expectInvalid(Request(url: server.url("/echo"), method: .put, body: .file(file)), containing: "body file")
            #expect(server.requests.isEmpty)
        }
    }

    @Test func aRedirectToFileIsRefused() async throws {
        try await withServer { server in
            let target = "file%3A%2F%2F%2Fetc%2Fpasswd"
            let result = await completion(of: RequestOperation(request: Request(url: server.url("/redirect?to=\(target)"))))
            #expect(result.failure?.transportFailure?.code == .unsupportedProtocol, "\(result)")
        }
    }

    /// A transfer that failed while following a redirect leaves its easy handle in a state
    /// where libcurl refuses some options; the next transfer on that (pooled) handle must still
    /// get every option it needs, redirects included.
    @Test func theTransferAfterARefusedRedirectStillFollowsRedirects() async throws {
        try await withServer { server in
            for _ in 0..<20 {
                let refused = await completion(of: RequestOperation(request: Request(url: server.url("/redirect?to=file%3A%2F%2F%2Fetc%2Fpasswd"))))
                #expect(refused.failure?.transportFailure?.code == .unsupportedProtocol, "\(refused)")
                let followed = try await RequestOperation(request: Request(url: server.url("/redirect-chain/1"))).response()
                #expect(followed.status == .ok && followed.metrics.redirectCount == 1,
                        "HTTP \(followed.status.code) after \(followed.metrics.redirectCount) redirects, \(followed.attempts) attempts, from \(followed.effectiveURL?.absoluteString ?? "?")")
            }
            // A refused redirect is the server's answer: never sent again (ReusedConnectionTests).
            #expect(server.requests.filter { $0.path == "/redirect" }.count == 20)
        }
    }

    @Test func credentialsAreNotForwardedToAnotherOrigin() async throws {
        try await withServer { server in
            try await withServer { other in
                let target = other.url("/echo").absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                var request = Request(url: server.url("/redirect?to=\(target)"))
                request.headerFields[.authorization] = "Bearer secret"
                request.headerFields[.cookie] = "session=secret"
                let response = try await RequestOperation(request: request).response()
                #expect(response.effectiveURL == other.url("/echo"), "status \(response.status), body \(String(decoding: response.body, as: UTF8.self).prefix(200))")
                #expect(server.requests.first?.header("Authorization") == "Bearer secret")
                #expect(other.requests.first?.header("Authorization") == nil)
                #expect(other.requests.first?.header("Cookie") == nil)
            }
        }
    }

    @Test func garbageFromTheServerIsATransportError() async throws {
        try await withServer { server in
            for kind in ["garbageStatus", "midHeaders", "reset"] {
                let result = await completion(of: RequestOperation(request: Request(url: server.url("/raw?kind=\(kind)"))))
                #expect(result.failure?.transportFailure != nil, "\(kind): \(result)")
            }
        }
    }
}
