import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import HTTPTypes
import Testing

/// A kept-alive connection can hold bytes that belong to no response: a server that sent more
/// than its Content-Length announced, or a body after a HEAD answer. libcurl reads them as the
/// start of the next response on that connection and refuses them (code 1). The request that
/// meets them is not at fault: an idempotent one runs again, once, on a new connection, without
/// counting as an attempt and whether or not `autoRetry` is on.
///
/// `/leftover` answers and then writes stray bytes ahead of the next response on its connection,
/// which makes the case deterministic (with a real server the bytes may arrive in time for
/// libcurl to see them and close the connection first).
@Suite struct ReusedConnectionTests {
    /// What one request did on a connection left with stray bytes.
    struct Outcome {
        var result: Result<Response, RequestError>
        /// The requests the server saw for it, in order; the first on the poisoned connection.
        var seen: [RecordedRequest]
        var poisonedConnection: Int
    }

    /// Runs the request `make` builds for a round, without `autoRetry`, until its first try
    /// goes over the connection `prepare` readied for that round (and returned the server's ID
    /// of): libcurl's pool is shared with the other tests, whose connections can push that one
    /// out. `isOurs` picks the round's requests from what the server saw. Nil if none of 10
    /// rounds did.
    func runOverPreparedConnection(
        _ server: FixtureServer,
        prepare: (_ round: String) async throws -> Int,
        make: (_ round: String) -> Request,
        isOurs: (_ request: RecordedRequest, _ round: String) -> Bool
    ) async throws -> Outcome? {
        let call = UUID().uuidString.prefix(8)
        for index in 0..<10 {
            let round = "\(call)-\(index)"
            let connection = try await prepare(round)
            let operation = RequestOperation(request: make(round))
            operation.autoRetry = false
            let result = await completion(of: operation)
            let seen = server.requests.filter { isOurs($0, round) }
            if seen.first?.connectionID == connection {
                return Outcome(result: result, seen: seen, poisonedConnection: connection)
            }
        }
        Issue.record("no request went over the connection made ready for it")
        return nil
    }

    /// Leaves `leftover` (default `HELLO THERE` and CRLF) on a connection, then runs the request
    /// `make` builds (its URL must carry the tag it is given) until its first try goes over
    /// that connection.
    func runOnPoisonedConnection(
        _ server: FixtureServer, leftover: String? = nil, _ make: (String) -> Request
    ) async throws -> Outcome? {
        let query = leftover.map { "?bytes=\($0)" } ?? ""
        return try await runOverPreparedConnection(server, prepare: { _ in
            let left = try await RequestOperation(request: Request(url: server.url("/leftover\(query)"))).response()
            #expect(left.status == .ok)
            return try #require(server.requests.last { $0.path == "/leftover" }).connectionID
        }, make: { round in make("round=\(round)") }, isOurs: { request, round in
            request.path != "/leftover" && request.uri.contains("round=\(round)")
        })
    }

    @Test func aGETThatMeetsLeftoverBytesRunsAgainOnANewConnection() async throws {
        try await withServer { server in
            guard let outcome = try await runOnPoisonedConnection(server, { Request(url: server.url("/bytes/10?\($0)")) }) else { return }
            let response = try outcome.result.get()
            #expect(response.body == Data(FixtureServer.expectedBytes(count: 10)))
            #expect(response.attempts == 1)
            #expect(outcome.seen.count == 2)
            #expect(outcome.seen.last?.connectionID != outcome.poisonedConnection)
        }
    }

    @Test func aDownloadThatMeetsLeftoverBytesEndsWithTheWholeFile() async throws {
        try await withServer { server in
            let folder = try makeTemporaryFolder()
            defer { try? FileManager.default.removeItem(at: folder) }
            let destination = folder.appendingPathComponent("file")
            guard let outcome = try await runOnPoisonedConnection(server, {
                Request(url: server.url("/bytes/3000?\($0)"), destination: destination)
            }) else { return }
            let response = try outcome.result.get()
            #expect(response.fileURL == destination)
            #expect(try Data(contentsOf: destination) == Data(FixtureServer.expectedBytes(count: 3000)))
            #expect(!FileManager.default.fileExists(atPath: destination.path + ".part"))
            #expect(outcome.seen.count == 2)
        }
    }

    /// The server may have acted on a POST before the stray bytes came back: it is not sent
    /// again, and the error says what libcurl refused.
    @Test func aPOSTThatMeetsLeftoverBytesFailsWithoutBeingSentAgain() async throws {
        try await withServer { server in
            guard let outcome = try await runOnPoisonedConnection(server, { tag in
                var request = Request(url: server.url("/echo?\(tag)"))
                request.method = .post
                request.body = .bytes(Data("once".utf8))
                return request
            }) else { return }
            #expect(transportCode(of: outcome.result) == .unsupportedProtocol, "\(outcome.result)")
            #expect(outcome.seen.count == 1)
        }
    }

    /// Once only: a server that answers garbage on the new connection too gets the error.
    @Test func theNewConnectionIsTriedOnce() async throws {
        try await withServer { server in
            guard let outcome = try await runOnPoisonedConnection(server, {
                Request(url: server.url("/raw?kind=garbageStatus&\($0)"))
            }) else { return }
            #expect(transportCode(of: outcome.result) == .unsupportedProtocol, "\(outcome.result)")
            #expect(outcome.seen.count == 2)
        }
    }

    /// Bytes that start like a status line but are not one are refused with the same code
    /// (where a POST shows it), and met the same way.
    @Test func aBrokenStatusLineFromLeftoverBytesIsMetTheSameWay() async throws {
        try await withServer { server in
            let leftover = "HTTP/1.1%20abc%0D%0A"
            let refused = try await runOnPoisonedConnection(server, leftover: leftover) { tag in
                var request = Request(url: server.url("/echo?\(tag)"))
                request.method = .post
                return request
            }
            if let refused {
                #expect(transportCode(of: refused.result) == .unsupportedProtocol, "\(refused.result)")
            }
            guard let outcome = try await runOnPoisonedConnection(server, leftover: leftover, {
                Request(url: server.url("/bytes/10?\($0)"))
            }) else { return }
            #expect((try? outcome.result.get().body) == Data(FixtureServer.expectedBytes(count: 10)), "\(outcome.result)")
            #expect(outcome.seen.count == 2)
        }
    }

    // MARK: A reused connection closed without an answer

    /// Runs the request `make` builds for `/flaky/ID?failures=1&mode=close` until its first try
    /// goes over a kept-alive connection, which the server closes on reading it: libcurl then
    /// sends it again on a new connection, unless CurlQueue stops it.
    func runOnConnectionClosedWithoutAnswer(
        _ server: FixtureServer, _ make: (URL) -> Request
    ) async throws -> Outcome? {
        try await runOverPreparedConnection(server, prepare: { round in
            let warm = try await RequestOperation(request: Request(url: server.url("/bytes/1?warm=\(round)"))).response()
            #expect(warm.status == .ok)
            return try #require(server.requests.last { $0.uri.contains("warm=\(round)") }).connectionID
        }, make: { round in make(server.url("/flaky/\(round)?failures=1&mode=close")) }, isOurs: { request, round in
            request.path == "/flaky/\(round)"
        })
    }

    /// The control: libcurl's own resend of a request that a reused connection closed without
    /// an answer (the usual race with a server closing an idle connection) stays for a GET.
    @Test func aGETThatAReusedConnectionClosedWithoutAnAnswerIsSentAgainByLibcurl() async throws {
        try await withServer { server in
            guard let outcome = try await runOnConnectionClosedWithoutAnswer(server, { Request(url: $0) }) else { return }
            #expect(try outcome.result.get().status == .ok)
            #expect(outcome.seen.count == 2)
        }
    }

    @Test(arguments: [HTTPRequest.Method.post, .patch, HTTPRequest.Method("PURGE")!])
    func aRequestThatIsNotIdempotentIsNotSentAgainWhenAReusedConnectionClosesWithoutAnAnswer(
        _ method: HTTPRequest.Method
    ) async throws {
        try await withServer { server in
            guard let outcome = try await runOnConnectionClosedWithoutAnswer(server, { url in
                var request = Request(url: url)
                request.method = method
                if method == .post { request.body = .bytes(Data("charge the card".utf8)) }
                return request
            }) else { return }
            #expect(outcome.seen.count == 1, "sent again")
            let failure = outcome.result.failure?.transportFailure
            #expect(failure?.code == .gotNothing)
            #expect(failure?.message.contains("not sent again") == true)
        }
    }

    /// With `autoRetry`, the caller asked for retries: the next attempt sends it again.
    @Test func aPOSTIsSentAgainWhenTheCallerTurnedOnAutoRetry() async throws {
        try await withServer { server in
            _ = try await RequestOperation(request: Request(url: server.url("/bytes/1"))).response()
            var request = Request(url: server.url("/flaky/auto?failures=1&mode=close"))
            request.method = .post
            let operation = RequestOperation(request: request)
            operation.autoRetry = true
            operation.retryPolicy = RetryPolicy(initialBackoff: .milliseconds(10))
            let response = try await operation.response()
            #expect(response.status == .ok)
            #expect(server.requests.filter { $0.path == "/flaky/auto" }.count == 2)
        }
    }
}
