import CurlQueue
import CurlQueueTestSupport
import Foundation
import Testing

/// A kept-alive connection can hold bytes that belong to no response: a server that sent more
/// than its Content-Length announced, or a body after a HEAD answer. libcurl reads them as the
/// start of the next response on that connection and refuses them as HTTP/0.9 (code 1). The
/// request that meets them is not at fault: an idempotent one runs again, once, on a new
/// connection, without counting as an attempt and whether or not `autoRetry` is on.
///
/// `/leftover` answers and then writes stray bytes ahead of the next response on its connection,
/// which makes the case deterministic (with a real server the bytes may arrive in time for
/// libcurl to see them and close the connection first).
@Suite struct ReusedConnectionTests {
    /// Runs `/leftover` and returns the connection it left the bytes on.
    func leaveBytesBehind(on server: FixtureServer, _ bytes: String? = nil) async throws -> Int {
        let query = bytes.map { "?bytes=\($0)" } ?? ""
        let response = try await RequestOperation(request: Request(url: server.url("/leftover\(query)"))).response()
        #expect(response.status == .ok)
        return try #require(server.requests.last { $0.path == "/leftover" }).connectionID
    }

    func run(_ request: Request) async -> Result<Response, RequestError> {
        let operation = RequestOperation(request: request)
        operation.autoRetry = false
        return await completion(of: operation)
    }

    @Test func aGETThatMeetsLeftoverBytesRunsAgainOnANewConnection() async throws {
        try await withServer { server in
            let poisoned = try await leaveBytesBehind(on: server)
            let result = await run(Request(url: server.url("/bytes/10")))
            let response = try result.get()
            #expect(response.body == Data(FixtureServer.expectedBytes(count: 10)))
            #expect(response.attempts == 1)
            let connections = server.requests.filter { $0.path == "/bytes/10" }.map(\.connectionID)
            #expect(connections.count == 2)
            #expect(connections.first == poisoned, "the first try must have reused the connection")
            #expect(connections.last != poisoned)
        }
    }

    @Test func aDownloadThatMeetsLeftoverBytesEndsWithTheWholeFile() async throws {
        try await withServer { server in
            let folder = try makeTemporaryFolder()
            defer { try? FileManager.default.removeItem(at: folder) }
            let destination = folder.appendingPathComponent("file")
            _ = try await leaveBytesBehind(on: server)
            let response = try await run(Request(url: server.url("/bytes/3000"), destination: destination)).get()
            #expect(response.fileURL == destination)
            #expect(try Data(contentsOf: destination) == Data(FixtureServer.expectedBytes(count: 3000)))
            #expect(!FileManager.default.fileExists(atPath: destination.path + ".part"))
            #expect(server.requests.filter { $0.path == "/bytes/3000" }.count == 2)
        }
    }

    /// The server may have acted on a POST before the stray bytes came back: it is not sent
    /// again, and the error says what libcurl refused.
    @Test func aPOSTThatMeetsLeftoverBytesFailsWithoutBeingSentAgain() async throws {
        try await withServer { server in
            _ = try await leaveBytesBehind(on: server)
            var request = Request(url: server.url("/echo"))
            request.method = .post
            request.body = .bytes(Data("once".utf8))
            let result = await run(request)
            #expect(transportCode(of: result) == .unsupportedProtocol, "\(result)")
            #expect(server.requests.filter { $0.path == "/echo" }.count == 1)
        }
    }

    /// Once only: a server that answers garbage on the new connection too gets the error.
    @Test func theNewConnectionIsTriedOnce() async throws {
        try await withServer { server in
            _ = try await leaveBytesBehind(on: server)
            let result = await run(Request(url: server.url("/raw?kind=garbageStatus")))
            #expect(transportCode(of: result) == .unsupportedProtocol, "\(result)")
            #expect(server.requests.filter { $0.path == "/raw" }.count == 2)
        }
    }

    /// Bytes that start like a status line but are not one are refused with the same code
    /// (where a POST shows it), and met the same way.
    @Test func aBrokenStatusLineFromLeftoverBytesIsMetTheSameWay() async throws {
        try await withServer { server in
            let leftover = "HTTP/1.1%20abc%0D%0A"
            _ = try await leaveBytesBehind(on: server, leftover)
            var post = Request(url: server.url("/echo"))
            post.method = .post
            let refused = await run(post)
            #expect(transportCode(of: refused) == .unsupportedProtocol, "\(refused)")

            _ = try await leaveBytesBehind(on: server, leftover)
            let result = await run(Request(url: server.url("/bytes/10")))
            #expect((try? result.get().body) == Data(FixtureServer.expectedBytes(count: 10)), "\(result)")
            #expect(server.requests.filter { $0.path == "/bytes/10" }.count == 2)
        }
    }
}
