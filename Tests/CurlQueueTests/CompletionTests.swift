import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// The completion handler is called exactly once, whatever happens and whenever cancel comes.
@Suite struct CompletionTests {
    @Test func startingTwiceThrows() async throws {
        try await withServer { server in
            let operation = RequestOperation(request: Request(url: server.url("/bytes/1")))
            _ = await completion(of: operation)
            #expect(throws: RequestOperationError.alreadyStarted) { try operation.start() }
        }
    }

    @Test func cancelAfterCompletionDoesNotCallTheHandlerAgain() async throws {
        try await withServer { server in
            let calls = LockedBox(0)
            let operation = RequestOperation(request: Request(url: server.url("/bytes/1")))
            let done = LockedBox(false)
            await withCheckedContinuation { continuation in
                operation.completionHandler = { _ in
                    calls.update { $0 += 1 }
                    if !done.update({ let was = $0; $0 = true; return was }) { continuation.resume() }
                }
                try! operation.start()
            }
            operation.cancel()
            operation.cancel()
            await drain()
            #expect(calls.value == 1)
            #expect(operation.isFinished)
            #expect(!operation.isCancelled)
        }
    }

    @Test func cancelBeforeStartCompletesWithCancelled() async throws {
        let operation = RequestOperation(request: Request(string: "http://127.0.0.1:9/never"))
        let result = await withCheckedContinuation { continuation in
            operation.completionHandler = { continuation.resume(returning: $0) }
            operation.cancel()
        }
        #expect(result.failure == .cancelled)
        #expect(throws: RequestOperationError.alreadyStarted) { try operation.start() }
    }

    @Test func cancelMidBodyLeavesTheEnginePromptly() async throws {
        try await withServer { server in
            let operation = RequestOperation(request: Request(url: server.url("/bytes/1000000?stallAfter=1000")))
            let received = LockedBox(false)
            operation.downloadProgressHandler = { progress in
                if progress.bytesTransferred > 0 { received.update { $0 = true } }
            }
            async let result = completion(of: operation)
            try await server.waitForRequests(pathPrefix: "/bytes", count: 1)
            operation.cancel()
            // The server stalls forever: only the cancel can end this transfer.
            #expect(await result.failure == .cancelled)
            #expect(operation.isCancelled)
        }
    }

    @Test func cancelWhileTheServerHasNotAnsweredCompletesCancelled() async throws {
        try await withServer { server in
            let operation = RequestOperation(request: Request(url: server.url("/gate/never")))
            async let result = completion(of: operation)
            try await server.waitForRequests(pathPrefix: "/gate/never", count: 1)
            operation.cancel()
            #expect(await result.failure == .cancelled)
            // The engine dropped the connection: the server sees it close.
            #expect(server.inFlight <= 1)
        }
    }

    @Test func cancellingTheAwaitingTaskCancelsTheOperation() async throws {
        try await withServer { server in
            let operation = RequestOperation(request: Request(url: server.url("/gate/task")))
            let task = Task { try await operation.response() }
            try await server.waitForRequests(pathPrefix: "/gate/task", count: 1)
            task.cancel()
            let result = await task.result
            #expect(throws: RequestError.cancelled) { try result.get() }
            #expect(operation.isCancelled)
        }
    }

    @Test func aHandlerMayStartAndCancelOperationsWithoutDeadlock() async throws {
        try await withServer { server in
            let first = RequestOperation(request: Request(url: server.url("/bytes/10")))
            let second = RequestOperation(request: Request(url: server.url("/bytes/20")))
            let third = RequestOperation(request: Request(url: server.url("/gate/third")))
            let result = await withCheckedContinuation { continuation in
                first.completionHandler = { _ in
                    second.completionHandler = { continuation.resume(returning: $0) }
                    try! second.start()
                    try! third.start()
                    third.cancel()
                }
                try! first.start()
            }
            let body = try result.get().body
            #expect(body.count == 20)
            await #expect(throws: RequestError.cancelled) { try await third.response() }
        }
    }

    /// 10,000 operations through a queue of 64 (and 100 on their own), cancelled at random
    /// moments from other threads — before they are added, while pending, while running: every
    /// one completes exactly once. (At most about 164 connections at once: more would push the
    /// shared engine's cache of 256 idle connections to evict those of tests running beside it.)
    @Test func exactlyOnceAcrossTenThousandOperationsWithRandomCancels() async throws {
        try await withServer { server in
            let count = 10_000
            let calls = LockedBox([Int](repeating: 0, count: count))
            let remaining = LockedBox(count)
            let paths = ["/bytes/10", "/bytes/2000?delay=2", "/bytes/50000?chunked=1", "/status/404", "/bytes/100?drip=1&chunk=10"]
            let operations = (0..<count).map { index in
                let path = paths[index % paths.count]
                return RequestOperation(request: Request(url: server.url(path + (path.contains("?") ? "&" : "?") + "i=\(index)")))
            }
            let queue = RequestQueue(maxConcurrentRequestCount: 64)
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                for (index, operation) in operations.enumerated() {
                    operation.completionHandler = { _ in
                        calls.update { $0[index] += 1 }
                        if remaining.update({ $0 -= 1; return $0 }) == 0 { continuation.resume() }
                    }
                }
                DispatchQueue.global().async {
                    for (index, operation) in operations.enumerated() {
                        if index % 7 == 3 { operation.cancel() }  // before it is added
                        if index % 100 == 1 { try? operation.start() } else { try? queue.add(operation) }
                    }
                }
                DispatchQueue.global().async {
                    for _ in 0..<(count / 3) { operations.randomElement()!.cancel() }
                }
            }
            // Any second call would have been queued behind the first ones by now.
            operations.forEach { $0.cancel() }
            await drain()
            #expect(calls.value.allSatisfy { $0 == 1 })
            #expect(queue.requestCount == 0)
        }
    }

    /// Holds an operation and cancels it when it goes away, as an object that owns a
    /// download and is captured by its handler may do.
    final class CancelsOnDeinit: Sendable {
        let operation: RequestOperation
        init(_ operation: RequestOperation) { self.operation = operation }
        deinit { operation.cancel() }
    }

    @Test(arguments: ["completion", "download", "upload", "body", "head"])
    func replacingAHandlerReleasesTheOldOneOutsideTheOperationsLock(_ handler: String) async throws {
        let operation = RequestOperation(request: Request(url: URL(string: "http://127.0.0.1:9/never")!))
        do {
            let owner = CancelsOnDeinit(operation)  // its only reference: the handler's
            switch handler {
            case "completion": operation.completionHandler = { _ in _ = owner }
            case "download": operation.downloadProgressHandler = { _ in _ = owner }
            case "upload": operation.uploadProgressHandler = { _ in _ = owner }
            case "body": operation.responseBodyHandler = { _ in _ = owner }
            default: operation.responseHeadHandler = { _ in _ = owner }
            }
        }
        // Replacing it runs the owner's deinit, which takes the operation's lock: a setter
        // that let go of the old closure under that lock never returns.
        let returned = DispatchSemaphore(value: 0)
        Thread {
            switch handler {
            case "completion": operation.completionHandler = nil
            case "download": operation.downloadProgressHandler = nil
            case "upload": operation.uploadProgressHandler = nil
            case "body": operation.responseBodyHandler = nil
            default: operation.responseHeadHandler = nil
            }
            returned.signal()
        }.start()
        let done = await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: returned.wait(timeout: .now() + 10) == .success) }
        }
        #expect(done, "the setter is stuck on the operation's lock")
        if done { #expect(operation.isCancelled) }  // else the lock is held for good
    }
}
