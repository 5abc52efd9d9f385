import CurlQueue
import CurlQueueClient
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Dispatch
import Foundation
import Testing

struct User: Codable, Sendable, Equatable {
    var nick: String
    var level: Int
}

let userJSON = #"{"nick":"ann","level":3}"#

/// The three result styles: async/await (typed and raw), completion closures (on the
/// callback queue, start first, exactly one outcome) and a weakly held delegate.
@Suite struct HTTPClientResultStyleTests {
    @Test func asyncCallsReturnATypedValue() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let (path, query) = jsonPath(userJSON)
            #expect(try await client.get(path, query: query, as: User.self) == User(nick: "ann", level: 3))
        }
    }

    @Test func asyncRawCallsReturnTheResponseWhateverItsStatus() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let response = try await client.get("status/404")
            #expect(response.status.code == 404)
            #expect(String(decoding: response.body, as: UTF8.self) == "status 404")
        }
    }

    @Test func closuresRunOnTheCallbackQueueStartFirstThenOneOutcome() async throws {
        try await withServer { (server) async throws in
            let key = DispatchSpecificKey<String>()
            let callbackQueue = DispatchQueue(label: "test.client.callbacks")
            callbackQueue.setSpecific(key: key, value: "mine")
            let client = makeClient(server) { $0.callbackQueue = callbackQueue }
            let onQueue = LockedBox<[Bool]>([])
            let recorder = CallRecorder<User>()
            let (path, query) = jsonPath(userJSON)
            client.request(.get, path, query: query, as: User.self, onStart: {
                onQueue.update { $0.append(DispatchQueue.getSpecific(key: key) == "mine" && Thread.current.name != "CurlQueueEngine") }
                recorder.onStart()
            }, onSuccess: { user in
                onQueue.update { $0.append(DispatchQueue.getSpecific(key: key) == "mine" && Thread.current.name != "CurlQueueEngine") }
                recorder.onSuccess(user)
            }, onError: recorder.onError)
            #expect(await recorder.outcome().value == User(nick: "ann", level: 3))
            await drainClientCallbacks(callbackQueue)
            #expect(recorder.recordedEvents == ["start", "success"])
            #expect(onQueue.value == [true, true])
        }
    }

    @Test func aClosureCallThatFailsCallsOnlyOnError() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let recorder = CallRecorder<User>()
            client.request(.get, "status/500", as: User.self, onStart: recorder.onStart,
                           onSuccess: recorder.onSuccess, onError: recorder.onError)
            let error = await recorder.outcome().failure
            #expect(error?.response?.status.code == 500)
            await drainClientCallbacks()
            #expect(recorder.recordedEvents == ["start", "error"])
        }
    }

    @Test func aRawClosureCallSucceedsWithAnyStatus() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let recorder = CallRecorder<Response>()
            client.request(.delete, "status/503", onSuccess: recorder.onSuccess, onError: recorder.onError)
            #expect(await recorder.outcome().value?.status.code == 503)
        }
    }

    struct GetUser: APIRequest {
        typealias Output = User
        var path: String { "json" }
        var query: [URLQueryItem] { [URLQueryItem(name: "body", value: userJSON)] }
    }

    final class Delegate: HTTPClientDelegate, @unchecked Sendable {  // safe: every member is guarded by `lock`
        private let lock = NSLock()
        private var events: [String] = []
        private var finished = false
        private var waiters: [CheckedContinuation<Void, Never>] = []

        var recordedEvents: [String] { lock.withLock { events } }

        func httpClient(_ client: HTTPClient, didStart call: RequestHandle.ID) {
            lock.withLock { events.append("start \(call)") }
        }
        func httpClient(_ client: HTTPClient, call: RequestHandle.ID, didSucceedWith output: any Sendable) {
            finish("success \(call) \((output as? User)?.nick ?? "?")")
        }
        func httpClient(_ client: HTTPClient, call: RequestHandle.ID, didFailWith error: HTTPClientError) {
            finish("failure \(call) \(error)")
        }

        private func finish(_ event: String) {
            let waiters = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
                events.append(event)
                finished = true
                defer { self.waiters = [] }
                return self.waiters
            }
            for waiter in waiters { waiter.resume() }
        }

        /// Returns once the delegate heard an outcome.
        func outcome() async {
            await withCheckedContinuation { continuation in
                let done = lock.withLock { () -> Bool in
                    if finished { return true }
                    waiters.append(continuation)
                    return false
                }
                if done { continuation.resume() }
            }
        }
    }

    @Test func aDelegateHearsTheStartThenTheOutcome() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let delegate = Delegate()
            let handle = client.send(GetUser(), delegate: delegate)
            await delegate.outcome()
            await drainClientCallbacks()
            #expect(delegate.recordedEvents == ["start \(handle.id)", "success \(handle.id) ann"])
        }
    }

    @Test func theDelegateIsHeldWeaklyAndItsCallStillRuns() async throws {
        try await withServer { (server) async throws in
            let queue = RequestQueue(maxConcurrentRequestCount: 8)
            let client = makeClient(server) { $0.queue = queue }
            let events = queue.events()  // before the call: its transfer's end is the event waited for
            var delegate: Delegate? = Delegate()
            weak let weakDelegate = delegate
            _ = client.send(GetUser(), delegate: delegate!)  // managed: runs whether or not the handle is kept
            delegate = nil
            // The call runs to its end without its delegate: its transfer gets the response…
            for await event in events {
                guard case .finished(_, let result) = event else { continue }
                #expect((try? result.get())?.status == .ok, "\(result)")
                break
            }
            // …and once its callbacks have run, nothing of the client holds the delegate. (Not
            // checked before: the call's task, not yet run on a loaded machine, holds it a moment.)
            await drainClientCallbacks()
            #expect(weakDelegate == nil)
        }
    }
}
