import CurlQueue
import CurlQueueClient
import CurlQueueTestHelpers
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
            let (ended, sink) = AsyncStream<Int>.makeStream()
            async let results = client.batch([Fetch(path: "gate/batch-all"), Fetch(path: "status/500")], failFast: false,
                                             onEach: { index, _ in sink.yield(index) })
            // The batch has taken the 500 (and, failing fast, would have cancelled the gate's call).
            var iterator = ended.makeAsyncIterator()
            #expect(await iterator.next() == 1)
            try await server.waitForRequests(pathPrefix: "/gate/batch-all", count: 1)
            server.openGate("batch-all")
            let finished = await results
            #expect(await iterator.next() == 0)
            #expect(finished[0].isSuccess)
            #expect(finished[1].failure?.response?.status.code == 500)
        }
    }

    @Test func onEachReportsEveryCallOnceInTheOrderTheyEnd() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let (ended, sink) = AsyncStream<(Int, Bool)>.makeStream()
            async let results = client.batch(
                [Fetch(path: "gate/each-first"), Fetch(path: "bytes/1"), Fetch(path: "gate/each-last")],
                onEach: { index, result in sink.yield((index, result.isSuccess)) })
            var iterator = ended.makeAsyncIterator()
            // The gates fix the order: the plain call, then each gate as it opens.
            #expect(await iterator.next()?.0 == 1)
            try await server.waitForRequests(pathPrefix: "/gate/each-last", count: 1)
            server.openGate("each-last")
            #expect(await iterator.next()?.0 == 2)
            try await server.waitForRequests(pathPrefix: "/gate/each-first", count: 1)
            server.openGate("each-first")
            #expect(await iterator.next()?.0 == 0)
            #expect(await results.allSatisfy { $0.isSuccess })
            sink.finish()
            #expect(await iterator.next() == nil)  // once per call: no fourth report
        }
    }

    @Test func onEachReportsTheFailureBeforeTheCallsItCancelled() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let reports = LockedBox<[Int]>([])
            let results = await client.batch([Fetch(path: "gate/each-never"), Fetch(path: "status/500")],
                                             onEach: { index, _ in reports.update { $0.append(index) } })
            #expect(reports.value == [1, 0])
            #expect(results[0].failure?.isCancelled == true)
        }
    }

    @Test func aBatchWithClosuresRunsEachOnEachOnTheCallbackQueueBeforeOnFinish() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let events = LockedBox<[String]>([])
            let key = DispatchSpecificKey<Bool>()
            HTTPClient.defaultCallbackQueue.setSpecific(key: key, value: true)
            let results = await withCheckedContinuation { continuation in
                client.batch([Fetch(path: "bytes/1"), Fetch(path: "status/404"), Fetch(path: "bytes/2")], failFast: false,
                             onEach: { index, _ in
                                 events.update { $0.append("each \(index)" + (DispatchQueue.getSpecific(key: key) == true ? "" : " elsewhere")) }
                             }, onFinish: { results in
                                 events.update { $0.append("finish") }
                                 continuation.resume(returning: results)
                             })
            }
            #expect(results.count == 3)
            #expect(events.value.count == 4)
            #expect(Set(events.value.dropLast()) == ["each 0", "each 1", "each 2"])
            #expect(events.value.last == "finish")
        }
    }

    @Test func aBatchWithClosuresDeliversAllResultsOnce() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let calls = LockedBox(0)
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
            let (ended, sink) = AsyncStream<Int>.makeStream()
            let handle = client.batch([Fetch(path: "bytes/1"), Fetch(path: "gate/batch-cancel")], failFast: false,
                                      onEach: { index, _ in sink.yield(index) }, onFinish: finished.onSuccess)
            try await server.waitForRequests(pathPrefix: "/gate/batch-cancel", count: 1)
            var iterator = ended.makeAsyncIterator()
            #expect(await iterator.next() == 0)  // the first call is done, and the batch has its result
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
            let built = LockedBox(0)
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
