import CurlQueue
@testable import CurlQueueClient
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import HTTPTypes
import Testing

/// Identical calls of one client in flight at once: GETs and HEADs share one transfer and
/// every caller gets its response; nothing is cancelled behind a caller's back.
/// Serialized: the tests with the default configuration share ``HTTPClient/defaultQueue`` and
/// its two slots, and hold them at gates.
@Suite(.serialized) struct HTTPClientCoalescingTests {
    /// The default configuration (its default queue), as an application would make it.
    func defaultClient(_ server: FixtureServer) -> HTTPClient {
        HTTPClient(configuration: HTTPClient.Configuration(baseURL: URL(string: server.baseURL)!))
    }

    /// `count` tasks calling `call` at once.
    func concurrently<T: Sendable>(
        _ count: Int, _ call: @escaping @Sendable () async throws(HTTPClientError) -> T
    ) -> [Task<T, any Error>] {
        (0..<count).map { _ in Task { () async throws -> T in try await call() } }
    }

    /// How many requests for `path` the server received.
    func requests(_ server: FixtureServer, _ path: String) -> Int {
        server.requests.filter { $0.path == path }.count
    }

    func statuses(_ tasks: [Task<Response, any Error>]) async -> [String] {
        var statuses: [String] = []
        for task in tasks {
            do { statuses.append("\(try await task.value.status.code)") } catch { statuses.append("\(error)") }
        }
        return statuses
    }

    @Test func concurrentIdenticalGETsWithTheDefaultConfigurationShareOneTransferAndAllSucceed() async throws {
        try await withServer { (server) async throws in
            let client = defaultClient(server)
            let tasks = concurrently(10) { () async throws(HTTPClientError) in try await client.get("gate/same") }
            try await server.waitForRequests(pathPrefix: "/gate/same", count: 1)
            #expect(await client.inFlight.waitUntilSharing(10))
            server.openGate("same")
            #expect(await statuses(tasks) == Array(repeating: "200", count: 10))
            #expect(requests(server, "/gate/same") == 1)
            // A call after the outcome makes a transfer of its own.
            #expect(try await client.get("gate/same").status == .ok)
            #expect(requests(server, "/gate/same") == 2)
        }
    }

    @Test func identicalHEADsShareOneTransfer() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let tasks = concurrently(3) { () async throws(HTTPClientError) in try await client.head("gate/head") }
            try await server.waitForRequests(pathPrefix: "/gate/head", count: 1)
            #expect(await client.inFlight.waitUntilSharing(3))
            server.openGate("head")
            #expect(await statuses(tasks) == Array(repeating: "200", count: 3))
            #expect(requests(server, "/gate/head") == 1)
        }
    }

    @Test func differentCredentialsAreSeparateTransfers() async throws {
        try await withServer { (server) async throws in
            let client = defaultClient(server)
            func get(_ token: String) -> Task<Response, any Error> {
                Task { try await client.get("gate/creds", headerFields: [.authorization: "Bearer \(token)"]) }
            }
            let tasks = [get("alice"), get("bob"), get("alice")]
            // Two transfers: alice's (shared by two calls) and bob's.
            try await server.waitForRequests(pathPrefix: "/gate/creds", count: 2)
            #expect(await client.inFlight.waitUntilSharing(2))
            server.openGate("creds")
            #expect(await statuses(tasks) == Array(repeating: "200", count: 3))
            let seen = server.requests.filter { $0.path == "/gate/creds" }
            #expect(seen.compactMap { $0.header("Authorization") }.sorted() == ["Bearer alice", "Bearer bob"])
        }
    }

    @Test func identicalPOSTsWithTheDefaultConfigurationEachRun() async throws {
        try await withServer { (server) async throws in
            let client = defaultClient(server)
            let posts = concurrently(2) { () async throws(HTTPClientError) in
                try await client.post("gate/post", body: .bytes(Data("same".utf8)))
            }
            // Both reach the server: neither was shared, neither was cancelled.
            try await server.waitForRequests(pathPrefix: "/gate/post", count: 2)
            server.openGate("post")
            #expect(await statuses(posts) == ["200", "200"])
        }
    }

    @Test func oneCallerCancellingLeavesTheSharedTransferToTheOthers() async throws {
        try await withServer { (server) async throws in
            let client = defaultClient(server)
            let tasks = concurrently(3) { () async throws(HTTPClientError) in try await client.get("gate/leave") }
            try await server.waitForRequests(pathPrefix: "/gate/leave", count: 1)
            #expect(await client.inFlight.waitUntilSharing(3))
            tasks[1].cancel()
            // The cancelled caller ends at once, while the transfer still waits at the gate.
            do {
                _ = try await tasks[1].value
                Issue.record("the cancelled call succeeded")
            } catch let error as HTTPClientError {
                #expect(error.isCancelled)
            }
            server.openGate("leave")
            #expect(try await tasks[0].value.status == .ok)
            #expect(try await tasks[2].value.status == .ok)
            #expect(requests(server, "/gate/leave") == 1)
        }
    }

    @Test func everyCallerCancellingCancelsTheSharedTransfer() async throws {
        try await withServer { (server) async throws in
            let client = defaultClient(server)
            let tasks = concurrently(2) { () async throws(HTTPClientError) in try await client.get("gate/all") }
            try await server.waitForRequests(pathPrefix: "/gate/all", count: 1)
            #expect(await client.inFlight.waitUntilSharing(2))
            let connection = try #require(server.requests.first { $0.path == "/gate/all" }).connectionID
            for task in tasks { task.cancel() }
            #expect(await statuses(tasks).allSatisfy { $0.contains("cancelled") })
            // The transfer left the engine: its connection closes though the gate never opens.
            await server.waitUntilConnectionClosed(connection)
            await HTTPClient.defaultQueue.waitUntilAllOperationsAreFinished()
            // A new call makes a new transfer rather than joining the cancelled one.
            let again = Task { try await client.get("gate/all") }
            try await server.waitForRequests(pathPrefix: "/gate/all", count: 2)
            server.openGate("all")
            #expect(try await again.value.status == .ok)
        }
    }

    @Test func aConfiguredQueueWithDuplicateCancellationStillCancelsEarlierIdenticalPOSTs() async throws {
        try await withServer { (server) async throws in
            let queue = RequestQueue(maxConcurrentRequestCount: 4)
            #expect(!queue.allowDuplicateRequests)
            let client = makeClient(server) { $0.queue = queue }
            queue.allowDuplicateRequests = false
            let first = Task { try await client.post("gate/post", body: .bytes(Data("same".utf8))) }
            try await server.waitForRequests(pathPrefix: "/gate/post", count: 1)
            let second = Task { try await client.post("gate/post", body: .bytes(Data("same".utf8))) }
            do {
                _ = try await first.value
                Issue.record("the earlier POST was not cancelled")
            } catch let error as HTTPClientError {
                #expect(error.isCancelled)
            }
            // Identical GETs on that queue share one transfer instead of cancelling each other.
            let gets = concurrently(3) { () async throws(HTTPClientError) in try await client.get("gate/post") }
            #expect(await client.inFlight.waitUntilSharing(3))
            server.openGate("post")
            #expect(try await second.value.status == .ok)
            #expect(await statuses(gets) == Array(repeating: "200", count: 3))
            #expect(server.requests.filter { $0.path == "/gate/post" && $0.method == "GET" }.count == 1)
        }
    }
}
