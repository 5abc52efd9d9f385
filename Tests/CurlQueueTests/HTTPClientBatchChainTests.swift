import CurlQueue
import CurlQueueTestSupport
import Foundation
import HTTPTypes
import Testing

/// A typed call to any path of the fixture.
struct Fetch: APIRequest {
    typealias Output = NoContent
    var path: String
}

/// Batches (all at once, each result, fail fast by default) and chains (each step from the
/// one before, stopping at the first failure), in async and closure forms.
@Suite struct HTTPClientBatchChainTests {
    @Test func aBatchReturnsEveryResultInRequestOrder() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let requests = [Fetch(path: "bytes/3?delay=60"), Fetch(path: "bytes/1"), Fetch(path: "bytes/2?delay=30")]
                .map { Fetch(path: $0.path.components(separatedBy: "?")[0]) }
            let results = await client.batch(requests)
            #expect(results.count == 3)
            #expect(results.allSatisfy { $0.isSuccess })
            #expect(Set(server.requests.map(\.uri)) == ["/bytes/3", "/bytes/1", "/bytes/2"])
        }
    }

    @Test func aFailureCancelsTheRestOfTheBatchByDefault() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let results = await client.batch([Fetch(path: "gate/batch-never"), Fetch(path: "status/500")])
            // The gate never opens: only the fail-fast cancel can have ended the first call.
            #expect(results[0].failure?.isCancelled == true)
            #expect(results[1].failure?.response?.status.code == 500)
        }
    }

    @Test func aBatchThatDoesNotFailFastRunsEveryCallToItsEnd() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            async let results = client.batch([Fetch(path: "gate/batch-all"), Fetch(path: "status/500")], failFast: false)
            try await server.waitForRequests(pathPrefix: "/status/500", count: 1)
            try await server.waitForRequests(pathPrefix: "/gate/batch-all", count: 1)
            try await Task.sleep(for: .milliseconds(100))  // the 500 is decided by now; nothing is cancelled
            server.openGate("batch-all")
            let finished = await results
            #expect(finished[0].isSuccess)
            #expect(finished[1].failure?.response?.status.code == 500)
        }
    }

    @Test func aBatchWithClosuresDeliversAllResultsOnce() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let calls = Box(0)
            let results = await withCheckedContinuation { continuation in
                client.batch([Fetch(path: "bytes/1"), Fetch(path: "status/404")]) { results in
                    calls.update { $0 += 1 }
                    continuation.resume(returning: results)
                }
            }
            #expect(results.count == 2)
            #expect(results[1].failure?.response?.status.code == 404)
            await drainClientCallbacks()
            #expect(calls.value == 1)
        }
    }

    @Test func cancellingABatchHandleCancelsTheCallsStillRunningAndKeepsTheOthers() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let finished = CallRecorder<[Result<NoContent, HTTPClientError>]>()
            let handle = client.batch([Fetch(path: "bytes/1"), Fetch(path: "gate/batch-cancel")], failFast: false,
                                      onFinish: finished.onSuccess)
            try await server.waitForRequests(pathPrefix: "/gate/batch-cancel", count: 1)
            try await server.waitForRequests(pathPrefix: "/bytes/1", count: 1)
            try await Task.sleep(for: .milliseconds(100))  // the first call is done by now
            handle.cancel()
            let results = try #require(await finished.outcome().value)
            #expect(results[0].isSuccess)
            #expect(results[1].failure?.isCancelled == true)
        }
    }

    struct EchoCall: APIRequest {
        typealias Output = Echo
        var path: String { "echo" }
        var query: [URLQueryItem]
    }

    @Test func aChainBuildsEachStepFromThePreviousOutput() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let chain = RequestChain(GetUserInfo(document: userJSON))
                .then { user in EchoCall(query: [URLQueryItem(name: "nick", value: user.nick)]) }
                .then { echo in EchoCall(query: [URLQueryItem(name: "previous", value: echo.uri)]) }
            let last = try await client.send(chain)
            #expect(last.uri == "/echo?previous=%2Fecho%3Fnick%3Dann")

            let recorder = CallRecorder<Echo>()
            client.send(chain, onSuccess: recorder.onSuccess, onError: recorder.onError)
            #expect(await recorder.outcome().value?.uri == last.uri)
        }
    }

    @Test func aChainStopsAtTheFirstFailure() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let built = Box(0)
            let chain = RequestChain(Fetch(path: "status/401"))
                .then { _ in built.update { $0 += 1 }; return Fetch(path: "bytes/1") }
            do throws(HTTPClientError) {
                _ = try await client.send(chain)
                Issue.record("the first step fails")
            } catch {
                #expect(error.response?.status.code == 401)
            }
            let recorder = CallRecorder<NoContent>()
            client.send(chain, onSuccess: recorder.onSuccess, onError: recorder.onError)
            #expect(await recorder.outcome().failure?.response?.status.code == 401)
            #expect(built.value == 0)
            #expect(!server.requests.contains { $0.path == "/bytes/1" })
        }
    }
}
