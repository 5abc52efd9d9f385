import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import HTTPTypes
import Testing

/// A server that sends more than its `Content-Length` announced leaves the surplus on a
/// kept-alive HTTP/1.1 connection. libcurl 7.88 closes the connection when the surplus comes in
/// the same read as the body, but reuses it when the surplus arrived later, and then reads it as
/// the next request's answer: `ok` + `EVIL` gave the first request `ok` and the next one `EVIL`
/// (a complete fake response is taken as it is). Each case here runs for several rounds; the
/// next request must get its own answer every time, and never the surplus.
@Suite struct ResponseSurplusTests {
    static let rounds = 10

    /// The kinds of surplus: a bare `EVIL`, and a complete response whose body is `EVIL`.
    static let kinds = ["text", "response"]

    enum Next: String, CaseIterable {
        case get, post, download
    }

    /// Runs the request of kind `next` tagged `round`, checks that its answer is its own, and
    /// returns what the server saw of it.
    func runNext(_ next: Next, _ server: FixtureServer, round: String, folder: URL) async throws -> [RecordedRequest] {
        switch next {
        case .get:
            let response = try await RequestOperation(request: Request(url: server.url("/bytes/10?round=\(round)"))).response()
            #expect(response.body == Data(FixtureServer.expectedBytes(count: 10)), "round \(round): \(String(decoding: response.body, as: UTF8.self))")
            #expect(response.attempts == 1)
        case .post:
            var request = Request(url: server.url("/echo?round=\(round)"))
            request.method = .post
            request.body = .bytes(Data("once".utf8))
            let response = try await RequestOperation(request: request).response()
            let body = String(decoding: response.body, as: UTF8.self)
            #expect(body.contains("\"POST\"") && body.contains("round=\(round)"), "round \(round): \(body)")
        case .download:
            let destination = folder.appendingPathComponent("file-\(round)")
            let response = try await RequestOperation(request: Request(url: server.url("/bytes/3000?round=\(round)"), destination: destination)).response()
            #expect(response.fileURL == destination)
            #expect(try Data(contentsOf: destination) == Data(FixtureServer.expectedBytes(count: 3000)), "round \(round)")
            #expect(!FileManager.default.fileExists(atPath: destination.path + ".part"))
        }
        return server.requests.filter { $0.uri.contains("round=\(round)") }
    }

    /// The surplus in the same write as the body: libcurl reads it with the body and closes
    /// the connection; the next request goes out on a new one.
    @Test(arguments: kinds)
    func aSurplusInTheSameWriteAsTheBodyNeverAnswersTheNextRequest(_ kind: String) async throws {
        try await withServer { server in
            let folder = try makeTemporaryFolder()
            defer { try? FileManager.default.removeItem(at: folder) }
            for index in 0..<Self.rounds {
                let round = "same-\(kind)-\(index)"
                let first = try await RequestOperation(request: Request(url: server.url("/surplus?kind=\(kind)&first=\(round)"))).response()
                #expect(first.body == Data("ok".utf8))
                let poisoned = try #require(server.requests.last { $0.uri.contains("first=\(round)") }).connectionID
                let seen = try await runNext(.get, server, round: round, folder: folder)
                #expect(seen.count == 1 && seen.allSatisfy { $0.connectionID != poisoned }, "round \(round): \(seen.map(\.connectionID)), poisoned \(poisoned)")
            }
        }
    }

    /// The surplus written once the first response was complete, before the next request goes
    /// out: the request is stopped before it is sent on that connection (which is closed) and
    /// runs on a new one, once, whatever its method, as nothing of it reached the server.
    @Test(arguments: kinds, Next.allCases)
    func aSurplusThatArrivesAfterTheResponseNeverAnswersTheNextRequest(_ kind: String, _ next: Next) async throws {
        try await withServer { server in
            let folder = try makeTemporaryFolder()
            defer { try? FileManager.default.removeItem(at: folder) }
            var rounds = 0
            for index in 0..<Self.rounds * 4 where rounds < Self.rounds {
                let round = "later-\(kind)-\(next)-\(index)"
                let first = try await RequestOperation(request: Request(url: server.url("/bytes/2?first=\(round)"))).response()
                #expect(first.status == .ok)
                let poisoned = try #require(server.requests.last { $0.uri.contains("first=\(round)") }).connectionID
                // libcurl's pool, shared with the other tests, may have closed the connection
                // already (the oldest idle one goes when the pool is full): another round then.
                guard await server.writeSurplus(kind, onConnection: poisoned) else { continue }
                rounds += 1
                let seen = try await runNext(next, server, round: round, folder: folder)
                let ownConnection = seen.count == 1 && seen.allSatisfy { $0.connectionID != poisoned }
                #expect(ownConnection, "round \(round): \(seen.map(\.connectionID)), poisoned \(poisoned)")
                guard ownConnection else { return }
                // The client closed the connection that held the surplus (it would otherwise stay
                // in libcurl's pool, ready to answer another request with it). Bounded, so that
                // a connection left open fails the test instead of hanging it.
                // (The waiting task ends at the latest when the server shuts down.)
                let (events, continuation) = AsyncStream<Bool>.makeStream()
                Task { await server.waitUntilConnectionClosed(poisoned); continuation.yield(true) }
                // The sleep is the event that ends the wait when the close never comes: a bound,
                // not a hope (the close is awaited above; 10 s is far beyond its milliseconds).
                let timer = Task { try? await Task.sleep(for: .seconds(10)); continuation.yield(false) }
                var iterator = events.makeAsyncIterator()
                let closed = await iterator.next() ?? false
                timer.cancel()
                #expect(closed, "round \(round): the connection that held the surplus is still open")
            }
            #expect(rounds > 0, "no round found its connection open")
        }
    }
}
