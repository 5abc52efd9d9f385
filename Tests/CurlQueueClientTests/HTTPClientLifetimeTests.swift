import CurlQueue
import CurlQueueClient
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// Handles: managed calls outlive their handle, unmanaged ones end with it; cancel, retry,
/// task cancellation, and exactly one outcome per call under random cancels.
@Suite struct HTTPClientLifetimeTests {
    @Test func aManagedCallRunsToItsEndWhenItsHandleIsDropped() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let recorder = CallRecorder<Response>()
            do {
                _ = client.request(.get, "gate/managed", onSuccess: recorder.onSuccess, onError: recorder.onError)
            }
            try await server.waitForRequests(pathPrefix: "/gate/managed", count: 1)
            server.openGate("managed")
            let response = try #require(await recorder.outcome().value)
            #expect(String(decoding: response.body, as: UTF8.self) == "open managed")
        }
    }

    @Test func anUnmanagedCallIsCancelledWhenItsHandleIsDeinitialized() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let recorder = CallRecorder<Response>()
            var handle: RequestHandle? = client.request(
                .get, "gate/unmanaged", lifetime: .unmanaged, onSuccess: recorder.onSuccess, onError: recorder.onError)
            try await server.waitForRequests(pathPrefix: "/gate/unmanaged", count: 1)
            #expect(handle?.isFinished == false)
            handle = nil  // the only reference: the call ends with it
            #expect(await recorder.outcome().failure?.isCancelled == true)
            // The engine dropped the connection: the server no longer has the request in flight.
            let connection = try #require(server.requests.first { $0.path == "/gate/unmanaged" }).connectionID
            await server.waitUntilConnectionClosed(connection)
            #expect(server.inFlight == 0)
            // The gate opens too late: the server has nobody left to answer.
            server.openGate("unmanaged")
            await drainClientCallbacks()
            #expect(recorder.outcomeCount == 1)
            #expect(server.requests.count == 1)
        }
    }

    @Test func anUnmanagedHandleDroppedAtOnceCompletesCancelled() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let recorder = CallRecorder<Response>()
            _ = client.request(.get, "gate/at-once", lifetime: .unmanaged, onStart: recorder.onStart,
                               onSuccess: recorder.onSuccess, onError: recorder.onError)
            #expect(await recorder.outcome().failure?.isCancelled == true)
            await drainClientCallbacks()
            #expect(recorder.recordedEvents == ["start", "error"])
        }
    }

    @Test func cancelOnAHandleDeliversCancelledOnceAndNothingAfter() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let recorder = CallRecorder<Response>()
            let handle = client.request(.get, "gate/cancel", onSuccess: recorder.onSuccess, onError: recorder.onError)
            try await server.waitForRequests(pathPrefix: "/gate/cancel", count: 1)
            handle.cancel()
            handle.cancel()
            #expect(await recorder.outcome().failure?.isCancelled == true)
            #expect(handle.isFinished)
            handle.cancel()
            server.openGate("cancel")
            await drainClientCallbacks()
            #expect(recorder.outcomeCount == 1)
        }
    }

    @Test func retrySendsTheSameCallAgainUnderANewHandle() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let recorder = CallRecorder<Response>()
            let first = client.request(.get, "flaky/again", onSuccess: recorder.onSuccess, onError: recorder.onError)
            #expect(await recorder.outcome().value?.status.code == 503)
            #expect(first.isFinished)
            let again = first.retry()
            #expect(again.id != first.id)
            #expect(again.lifetime == first.lifetime)
            let outcomes = await recorder.outcomes(2)
            #expect(outcomes.map { $0.value?.status.code } == [503, 200])
            #expect(server.hits("again") == 2)
        }
    }

    @Test func cancellingTheAwaitingTaskCancelsTheTransfer() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let task = Task { try await client.get("gate/task") }
            try await server.waitForRequests(pathPrefix: "/gate/task", count: 1)
            task.cancel()
            do {
                _ = try await task.value
                Issue.record("the gate never opened")
            } catch let error as HTTPClientError {
                #expect(error.isCancelled)
            }
        }
    }

    @Test func everyCallDeliversExactlyOneOutcomeUnderRandomCancels() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let count = 200
            let outcomes = LockedBox<[Int: Int]>([:])
            var generator = SeededGenerator(seed: 42)
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let delivered = LockedBox(0)
                let record: @Sendable (Int) -> Void = { index in
                    outcomes.update { $0[index, default: 0] += 1 }
                    if delivered.update({ $0 += 1; return $0 }) == count { continuation.resume() }
                }
                for index in 0..<count {
                    let handle = client.request(.get, "bytes/\(1000 + index)", query: [URLQueryItem(name: "delay", value: "\(index % 5)")],
                                                onSuccess: { _ in record(index) }, onError: { _ in record(index) })
                    if Bool.random(using: &generator) { handle.cancel() }
                }
            }
            await drainClientCallbacks()
            #expect(outcomes.value.count == count)
            #expect(outcomes.value.values.allSatisfy { $0 == 1 })
        }
    }
}
