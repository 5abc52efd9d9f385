import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import HTTPTypes
import Testing

/// One operation against the fixture server: methods, headers, bodies, statuses, redirects.
@Suite struct RequestOperationTests {
    struct Echo: Decodable {
        var method: String
        var uri: String
        var headers: [[String]]
        var bodyLength: Int
        var body: String

        func values(_ name: String) -> [String] {
            headers.filter { $0[0].lowercased() == name.lowercased() }.map { $0[1] }
        }
    }

    func echo(_ response: Response) throws -> Echo {
        try JSONDecoder().decode(Echo.self, from: response.body)
    }

    @Test func getReturnsTheBodyWithContentLength() async throws {
        try await withServer { server in
            let response = try await RequestOperation(request: Request(url: server.url("/bytes/100000"))).response()
            #expect(response.status == .ok)
            #expect(response.bodyBytes == FixtureServer.expectedBytes(count: 100_000))
            #expect(response.headerFields[.contentLength] == "100000")
            #expect(response.httpVersion == .http1_1)
            #expect(response.effectiveURL == server.url("/bytes/100000"))
            #expect(response.metrics.bytesReceived == 100_000)
            #expect(response.metrics.total > .zero)
            #expect(response.attempts == 1)
        }
    }

    @Test func chunkedBodiesWithoutLengthArriveWhole() async throws {
        try await withServer { server in
            let response = try await RequestOperation(request: Request(url: server.url("/bytes/300001?chunked=1&chunk=7000"))).response()
            #expect(response.headerFields[.contentLength] == nil)
            #expect(response.bodyBytes == FixtureServer.expectedBytes(count: 300_001))
        }
    }

    @Test(arguments: ["GET", "DELETE", "OPTIONS", "PURGE"])
    func methodsWithoutBodyAreSentAsGiven(method: String) async throws {
        try await withServer { server in
            let request = Request(url: server.url("/echo"), method: HTTPRequest.Method(method)!)
            let echo = try echo(try await RequestOperation(request: request).response())
            #expect(echo.method == method)
            #expect(echo.bodyLength == 0)
        }
    }

    @Test(arguments: ["POST", "PUT", "PATCH", "DELETE"])
    func methodsWithABodySendItExactly(method: String) async throws {
        try await withServer { server in
            let payload = Data((0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
            var request = Request(url: server.url("/echo"), method: HTTPRequest.Method(method)!, body: .bytes(payload))
            request.headerFields[.contentType] = "application/octet-stream"
            let echo = try echo(try await RequestOperation(request: request).response())
            #expect(echo.method == method)
            #expect(Data(base64Encoded: echo.body) == payload)
            #expect(echo.values("Expect").isEmpty, "no 100-continue wait")
        }
    }

    @Test func aPostWithoutContentTypeGetsNoFormTypeMadeUp() async throws {
        try await withServer { server in
            let request = Request(url: server.url("/echo"), method: .post, body: .bytes(Data("hi".utf8)))
            let echo = try echo(try await RequestOperation(request: request).response())
            #expect(echo.values("Content-Type").isEmpty)
            #expect(echo.values("Content-Length") == ["2"])
        }
    }

    @Test func aFileBodyIsStreamedFromDisk() async throws {
        try await withServer { server in
            let folder = try makeTemporaryFolder()
            defer { try? FileManager.default.removeItem(at: folder) }
            let file = folder.appendingPathComponent("upload.bin")
            let payload = Data(FixtureServer.expectedBytes(count: 3 * 1024 * 1024 + 5))
            try payload.write(to: file)
            let request = Request(url: server.url("/echo"), method: .put, body: .file(file))
            let echo = try echo(try await RequestOperation(request: request).response())
            #expect(echo.bodyLength == payload.count)
            #expect(server.requests.last?.bodyLength == payload.count)
        }
    }

    @Test func headHasNoBody() async throws {
        try await withServer { server in
            let response = try await RequestOperation(request: Request(url: server.url("/bytes/5000"), method: .head)).response()
            #expect(response.status == .ok)
            #expect(response.body.isEmpty)
            #expect(server.requests.last?.method == "HEAD")
        }
    }

    @Test func headerFieldsKeepTheirOrderAndRepeats() async throws {
        try await withServer { server in
            var request = Request(url: server.url("/echo"))
            request.headerFields.append(HTTPField(name: HTTPField.Name("X-Multi")!, value: "one"))
            request.headerFields.append(HTTPField(name: HTTPField.Name("X-Other")!, value: "mid"))
            request.headerFields.append(HTTPField(name: HTTPField.Name("X-Multi")!, value: "two"))
            request.addHeader("X-Empty", "")
            let echo = try echo(try await RequestOperation(request: request).response())
            #expect(echo.values("X-Multi") == ["one", "two"])
            #expect(echo.values("X-Empty") == [""])
            let names = echo.headers.map { $0[0].lowercased() }
            #expect(names.firstIndex(of: "x-multi")! < names.firstIndex(of: "x-other")!)
        }
    }

    @Test(arguments: [404, 500, 503, 204])
    func anHTTPErrorStatusIsAResponseNotAnError(status: Int) async throws {
        try await withServer { server in
            let response = try await RequestOperation(request: Request(url: server.url("/status/\(status)"))).response()
            #expect(response.status.code == status)
        }
    }

    @Test func redirectsAreFollowedAndTheEffectiveURLReported() async throws {
        try await withServer { server in
            let response = try await RequestOperation(request: Request(url: server.url("/redirect-chain/3"))).response()
            #expect(response.status == .ok)
            #expect(String(decoding: response.body, as: UTF8.self) == "end")
            #expect(response.effectiveURL == server.url("/redirect-chain/0"))
            #expect(response.metrics.redirectCount == 3)
        }
    }

    @Test func tooManyRedirectsFail() async throws {
        try await withServer { server in
            var request = Request(url: server.url("/redirect-loop"))
            request.redirectPolicy = .follow(max: 5)
            let result = await completion(of: RequestOperation(request: request))
            #expect(throws: RequestError.self) { try result.get() }
            #expect(result.failure?.transportFailure?.code == .tooManyRedirects)
        }
    }

    @Test func redirectsAreNotFollowedWhenSwitchedOff() async throws {
        try await withServer { server in
            var request = Request(url: server.url("/redirect-chain/2"))
            request.redirectPolicy = .none
            let response = try await RequestOperation(request: request).response()
            #expect(response.status == .found)
            #expect(response.headerFields[.location] != nil)
        }
    }

    @Test func connectionsAreReusedAcrossOperations() async throws {
        try await withServer { server in
            for _ in 0..<20 {
                _ = try await RequestOperation(request: Request(url: server.url("/bytes/10"))).response()
            }
            // Without reuse this would be 20. Usually it is 1; but the shared engine's
            // connection cache (256) serves the whole parallel suite, and a burst of connections
            // in another test can evict the idle one between two operations.
            #expect(server.connectionsAccepted < 10)
        }
    }

    @Test func aTotalTimeoutEndsAStalledTransferAsTimedOut() async throws {
        try await withServer { server in
            var request = Request(url: server.url("/bytes/100000?stallAfter=10"))
            request.timeouts.total = .milliseconds(300)
            let result = await completion(of: RequestOperation(request: request))
            guard case .failure(.timedOut(let failure)) = result else {
                Issue.record("expected timedOut, got \(result)")
                return
            }
            #expect(failure.code == .operationTimedOut)
        }
    }

    @Test func anIdleLimitEndsAStalledTransfer() async throws {
        try await withServer { server in
            var request = Request(url: server.url("/bytes/100000?stallAfter=10"))
            request.timeouts.idle = .seconds(1)
            let result = await completion(of: RequestOperation(request: request))
            guard case .failure(.timedOut(let failure)) = result else {
                Issue.record("expected timedOut, got \(result)")
                return
            }
            #expect(failure.code == .operationTimedOut)
        }
    }

    /// A 303 is followed with a GET; libcurl 7.88 would keep DELETE, PATCH or another method it
    /// sends as a custom one, and send it to the resource the server pointed at.
    @Test(arguments: ["DELETE", "PATCH", "PURGE"])
    func aSeeOtherIsNotFollowedWithAMethodOtherThanGET(_ name: String) async throws {
        try await withServer { server in
            var request = Request(url: server.url("/redirect?to=/echo&status=303"))
            request.method = HTTPRequest.Method(name)!
            if name == "PATCH" { request.body = .bytes(Data("patch".utf8)) }
            let response = try await RequestOperation(request: request).response()
            #expect(response.status.code == 303)
            #expect(response.headerFields[.location] == "/echo")
            #expect(server.requests.map(\.path) == ["/redirect"], "sent on to the See Other target")
        }
    }

    @Test(arguments: ["GET", "POST", "PUT"])
    func aSeeOtherIsFollowedWithAGET(_ name: String) async throws {
        try await withServer { server in
            var request = Request(url: server.url("/redirect?to=/echo&status=303"))
            request.method = HTTPRequest.Method(name)!
            let response = try await RequestOperation(request: request).response()
            #expect(response.status == .ok)
            let echo = try JSONDecoder().decode(Echo.self, from: response.body)
            #expect(echo.method == "GET")
            #expect(echo.uri == "/echo")
        }
    }
}
