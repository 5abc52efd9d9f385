@testable import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Dispatch
import Foundation
import Testing

/// Streamed response bodies: `RequestQueue.stream`, `RequestOperation.stream()` and
/// `responseBodyHandler`, against the fixture's `/lines` and `/bytes` routes. Event-driven:
/// the server releases lines through gates, and no test sleeps.
@Suite struct StreamingTests {
    struct Timeout: Error {}

    /// Runs `body`, failing after `seconds` instead of hanging the suite.
    func within<T: Sendable>(_ seconds: Double = 30, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: .seconds(seconds))
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else { throw Timeout() }
            return value
        }
    }

    /// The operation's result, also when it has finished already.
    func outcome(of operation: RequestOperation) async -> Result<Response, RequestError> {
        do {
            return .success(try await operation.response())
        } catch {
            return .failure(error)
        }
    }

    func isCancelled(_ result: Result<Response, RequestError>) -> Bool {
        if case .failure(.cancelled) = result { return true }
        return false
    }

    func line(_ index: Int) -> Data { Data("{\"n\":\(index)}\n".utf8) }

    // MARK: Delivery

    @Test func chunksArriveAsTheServerSendsThem() async throws {
        try await withServer { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 2)
            try await within {
                // The head is flushed before any line: the stream returns with no gate open.
                let response = try await queue.stream(Request(url: server.url("/lines?count=5&gate=g")))
                #expect(response.status == .ok)
                #expect(response.headerFields[.contentType] == "application/x-ndjson")
                var iterator = response.body.makeAsyncIterator()
                for index in 0..<5 {
                    server.openGate("g-\(index)")
                    // Line `index + 1` is not released yet: this chunk is line `index`, whole.
                    #expect(try await iterator.next() == line(index))
                }
                #expect(try await iterator.next() == nil)
                #expect(try await iterator.next() == nil)
            }
            await queue.waitUntilAllOperationsAreFinished()
        }
    }

    @Test func theClosureFormGetsTheHeadThenEachChunkAsItArrivesThenTheCompletion() async throws {
        try await withServer { server in
            enum Event: Equatable, Sendable {
                case head(Int)
                case chunk(Data)
                case completion(Int, bodyCount: Int)
            }
            let (events, sink) = AsyncStream<Event>.makeStream()
            let operation = RequestOperation(request: Request(url: server.url("/lines?count=4&gate=c")))
            operation.responseHeadHandler = { sink.yield(.head($0.status.code)) }
            operation.responseBodyHandler = { sink.yield(.chunk($0)) }
            operation.completionHandler = { result in
                if case .success(let response) = result {
                    sink.yield(.completion(response.status.code, bodyCount: response.body.count))
                }
                sink.finish()
            }
            try operation.start()
            try await within {
                var iterator = events.makeAsyncIterator()
                #expect(await iterator.next() == .head(200))
                for index in 0..<4 {
                    server.openGate("c-\(index)")
                    #expect(await iterator.next() == .chunk(line(index)))
                }
                #expect(await iterator.next() == .completion(200, bodyCount: 0), "the body is not kept")
                #expect(await iterator.next() == nil)
            }
        }
    }

    @Test func anOperationRunByAQueueStreamsToItsHandlersToo() async throws {
        try await withServer { server in
            let heads = LockedBox(0)
            let streamed = LockedBox(Data())
            let operation = RequestOperation(request: Request(url: server.url("/bytes/50000?chunk=7001")))
            operation.responseHeadHandler = { _ in heads.update { $0 += 1 } }
            operation.responseBodyHandler = { chunk in streamed.update { $0.append(chunk) } }
            let queue = RequestQueue(maxConcurrentRequestCount: 1)
            try queue.add(operation)
            let response = try await within { try await operation.response() }
            await drain()  // every chunk was handed to the serial callback queue before the outcome
            #expect(response.body.isEmpty, "the body is not kept")
            #expect(heads.value == 1)
            #expect(streamed.value == Data(FixtureServer.expectedBytes(count: 50_000)))
        }
    }

    /// A handler that refers to its own operation (to cancel it once it has read enough, say)
    /// is let go of when the operation finishes, as the completion handler is: the two no
    /// longer keep each other alive for good.
    @Test(arguments: ["body", "head"])
    func streamingHandlersAreLetGoOfOnceTheOperationFinished(_ handler: String) async throws {
        try await withServer { server in
            weak var released: RequestOperation?
            do {
                let operation = RequestOperation(request: Request(url: server.url("/bytes/1000")))
                released = operation
                operation.responseBodyHandler = { _ in }
                if handler == "body" {
                    operation.responseBodyHandler = { _ in _ = operation }
                } else {
                    operation.responseHeadHandler = { _ in _ = operation }
                }
                _ = try await within { try await operation.response() }
            }
            await drain()
            #expect(released == nil, "the operation and its \(handler) handler keep each other alive")
        }
    }

    /// Records the name of the thread its `deinit` ran on.
    final class RecordsItsRelease: Sendable {
        let thread: LockedBox<String?>
        init(_ thread: LockedBox<String?>) { self.thread = thread }
        deinit { thread.update { $0 = Thread.current.name ?? "unnamed" } }
    }

    /// An object that only a streaming handler holds goes away on the callback queue, with the
    /// completion handler, not on the engine thread, which runs no code of the caller's: the
    /// handlers stayed in an operation nobody kept, freed on the engine thread with it. (An
    /// empty body: no chunk's block on the callback queue holds the handler meanwhile.)
    @Test func anObjectOnlyAStreamingHandlerHoldsIsNotFreedOnTheEngineThread() async throws {
        try await withServer { server in
            let thread = LockedBox<String?>(nil)
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let operation = RequestOperation(request: Request(url: server.url("/bytes/0")))
                let owner = RecordsItsRelease(thread)  // its only reference: the handler's
                operation.responseBodyHandler = { _ in _ = owner }
                operation.completionHandler = { _ in continuation.resume() }
                try! operation.start()
            }
            await drain()
            #expect(thread.value != nil, "the handler was never let go of")
            #expect(thread.value != "CurlQueueEngine")
        }
    }

    @Test func aLargeChunkedBodyArrivesWholeAndInOrder() async throws {
        try await withServer { server in
            let operation = RequestOperation(request: Request(url: server.url("/bytes/3000017?chunked=1&chunk=7001")))
            let response = try await within { try await operation.stream() }
            var received = 0
            var matches = true
            for try await chunk in response.body {
                matches = matches && Array(chunk) == FixtureServer.expectedBytes(offset: received, count: chunk.count)
                received += chunk.count
            }
            #expect(matches)
            #expect(received == 3_000_017)
            let final = try await operation.response()
            #expect(final.status == .ok)
            #expect(final.body.isEmpty)
            #expect(final.metrics.bytesReceived == 3_000_017)
        }
    }

    @Test func aBodilessOrErrorResponseStreamsItsHeadAndBody() async throws {
        try await withServer { server in
            let queue = RequestQueue()
            let notFound = try await within { try await queue.stream(Request(url: server.url("/status/404"))) }
            #expect(notFound.status == .notFound)
            var body = Data()
            for try await chunk in notFound.body { body += chunk }
            #expect(body == Data("status 404".utf8))

            let head = try await within { try await queue.stream(Request(url: server.url("/bytes/10"), method: .head)) }
            #expect(head.headerFields[.contentLength] == "10")
            for try await _ in head.body { Issue.record("a HEAD response has no body") }
        }
    }

    @Test func aRedirectIsFollowedBeforeTheHeadIsHandedOver() async throws {
        try await withServer { server in
            let response = try await within {
                try await RequestQueue().stream(Request(url: server.url("/redirect?to=/lines%3Fcount%3D2")))
            }
            #expect(response.status == .ok)
            var body = Data()
            for try await chunk in response.body { body += chunk }
            #expect(body == line(0) + line(1))
        }
    }

    @Test func aFailureBeforeTheHeadIsThrownByStream() async throws {
        try await withServer { server in
            do {
                // The server closes the connection without answering.
                _ = try await within { try await RequestQueue().stream(Request(url: server.url("/flaky/nohead?failures=9&mode=close"))) }
                Issue.record("expected an error")
            } catch let error as RequestError {
                #expect(error.transportFailure?.code == .gotNothing)
            }
        }
    }

    @Test func theBodySizeLimitStillApplies() async throws {
        try await withServer { server in
            var request = Request(url: server.url("/lines?count=100"))
            request.maxResponseBodySize = 50
            let limited = request
            let response = try await within { try await RequestQueue().stream(limited) }
            var received = 0
            var failure: RequestError?
            do {
                for try await chunk in response.body { received += chunk.count }
            } catch {
                failure = error as? RequestError
            }
            #expect(received <= 50)
            #expect(failure?.transportFailure?.code == .fileSizeExceeded)
        }
    }

    @Test func streamNeedsAnOperationThatHasNotStarted() async throws {
        try await withServer { server in
            let operation = RequestOperation(request: Request(url: server.url("/lines?count=1")))
            try operation.start()
            await #expect(throws: RequestError.self) { _ = try await operation.stream() }
            _ = try await operation.response()
        }
    }

    // MARK: Failure and cancellation

    @Test func aFailureMidwayEndsTheSequenceWithTheTransportError() async throws {
        try await withServer { server in
            let operation = RequestOperation(request: Request(url: server.url("/lines?count=3&thenClose=1")))
            let response = try await within { try await operation.stream() }
            var iterator = response.body.makeAsyncIterator()
            var body = Data()
            var failure: RequestError?
            do {
                while let chunk = try await iterator.next() { body += chunk }
            } catch {
                failure = error as? RequestError
            }
            #expect(body == line(0) + line(1) + line(2), "what arrived before the failure is delivered")
            #expect(failure?.transportFailure?.code == .partialFile)
            #expect(try await iterator.next() == nil, "the error is thrown once")
            let result = await outcome(of: operation)
            #expect(transportCode(of: result) == .partialFile)
        }
    }

    @Test func aLoopOverTheBodyOfAResponseNoOneKeepsReadsItWhole() async throws {
        try await withServer { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 1)
            // The loop keeps only its iterator: the response and its body are gone once it has
            // one. Before, that cancelled the operation (0 bytes, then `.cancelled`).
            let received = try await within {
                var received = 0
                for try await chunk in try await queue.stream(Request(url: server.url("/bytes/300000?chunked=1&chunk=7001"))).body {
                    received += chunk.count
                }
                return received
            }
            #expect(received == 300_000)
            let alone = try await within {
                var iterator = try await queue.stream(Request(url: server.url("/bytes/5000"))).body.makeAsyncIterator()
                var alone = 0
                while let chunk = try await iterator.next() { alone += chunk.count }
                return alone
            }
            #expect(alone == 5000)
        }
    }

    @Test func breakingOutOfTheLoopCancelsAndClosesTheConnection() async throws {
        try await withServer { server in
            let operation = RequestOperation(request: Request(url: server.url("/lines?id=hb1&interval=2")))
            try await within {
                let response = try await operation.stream()
                var count = 0
                for try await _ in response.body {
                    count += 1
                    if count == 3 { break }
                }
                // `response` is still alive: leaving the loop alone cancelled the operation.
                await server.waitUntilClosed("hb1")
                withExtendedLifetime(response) {}
            }
            #expect(isCancelled(await outcome(of: operation)))
            #expect(operation.isCancelled)
        }
    }

    @Test func droppingTheResponseCancelsAndClosesTheConnection() async throws {
        try await withServer { server in
            let operation = RequestOperation(request: Request(url: server.url("/lines?id=hb2&interval=2")))
            try await within {
                do {
                    let response = try await operation.stream()
                    #expect(response.status == .ok)
                }
                await server.waitUntilClosed("hb2")
            }
            #expect(isCancelled(await outcome(of: operation)))
        }
    }

    @Test func cancellingTheIteratingTaskCancelsTheOperation() async throws {
        try await withServer { server in
            let operation = RequestOperation(request: Request(url: server.url("/lines?id=hb3&gate=t")))
            let response = try await within { try await operation.stream() }
            let (firstChunk, signal) = AsyncStream<Void>.makeStream()
            let task = Task {
                var iterator = response.body.makeAsyncIterator()
                _ = try await iterator.next()
                signal.yield()
                // Line 1 is never released: this waits until the task is cancelled.
                return try await iterator.next()
            }
            server.openGate("t-0")
            try await within {
                for await _ in firstChunk { break }
                task.cancel()
                let outcome = await task.result
                #expect(throws: RequestError.cancelled) { try outcome.get() }
                await server.waitUntilClosed("hb3")
            }
            #expect(isCancelled(await outcome(of: operation)))
        }
    }

    // MARK: Retry

    @Test func noRetryOnceTheHeadWasHandedOver() async throws {
        try await withServer { server in
            // The first answer announces 200,000 bytes and closes after half of them.
            let operation = RequestOperation(request: Request(url: server.url("/flaky/nr?failures=1&mode=closeMidBody&bytes=200000")))
            operation.autoRetry = true
            operation.retryPolicy = RetryPolicy(initialBackoff: .milliseconds(1))
            let response = try await within { try await operation.stream() }
            var received = 0
            var failure: RequestError?
            do {
                for try await chunk in response.body {
                    #expect(Array(chunk) == FixtureServer.expectedBytes(offset: received, count: chunk.count))
                    received += chunk.count
                }
            } catch {
                failure = error as? RequestError
            }
            #expect(failure?.transportFailure?.code == .partialFile)
            #expect(received == 100_000)
            #expect(server.hits("nr") == 1, "bytes already delivered are never replayed by a retry")
            let result = await outcome(of: operation)
            #expect(transportCode(of: result) == .partialFile)
        }
    }

    @Test func aFailureBeforeTheHeadIsRetriedAsUsual() async throws {
        try await withServer { server in
            let operation = RequestOperation(request: Request(url: server.url("/flaky/rb?failures=1&mode=close&bytes=50000")))
            operation.autoRetry = true
            operation.retryPolicy = RetryPolicy(initialBackoff: .milliseconds(1))
            let response = try await within { try await operation.stream() }
            var body = Data()
            for try await chunk in response.body { body += chunk }
            #expect(Array(body) == FixtureServer.expectedBytes(count: 50_000))
            #expect(server.hits("rb") == 2)
            #expect(try await operation.response().attempts == 2)
        }
    }

    @Test func aRetryableStatusIsNotHandedOverWhileARetryMayFollow() async throws {
        try await withServer { server in
            let operation = RequestOperation(request: Request(url: server.url("/flaky/rs?failures=2&status=503")))
            operation.autoRetry = true
            operation.retryPolicy = RetryPolicy(maxAttempts: 2, initialBackoff: .milliseconds(1), retryableStatuses: [503])
            // Attempt 1's 503 is retried unseen; attempt 2's is the last: it is the response.
            let response = try await within { try await operation.stream() }
            #expect(response.status == .serviceUnavailable)
            var body = Data()
            for try await chunk in response.body { body += chunk }
            #expect(body == Data("status 503".utf8))
            #expect(server.hits("rs") == 2)
        }
    }

    // MARK: Backpressure

    @Test func aSlowConsumerKeepsTheBufferedBytesUnderTheLimit() async throws {
        try await withServer { server in
            let total = 64 * 1024 * 1024
            let operation = RequestOperation(request: Request(url: server.url("/bytes/\(total)?chunked=1")))
            try await within(120) {
                let response = try await operation.stream()
                let stream = response.body.stream
                var iterator = response.body.makeAsyncIterator()
                var received = 0
                var inOrder = true
                while true {
                    // As slow as a consumer can be: take a chunk only once the transfer paused.
                    await stream.waitUntilPausedOrEnded()
                    guard let chunk = try await iterator.next() else { break }
                    inOrder = inOrder && Array(chunk) == FixtureServer.expectedBytes(offset: received, count: chunk.count)
                    received += chunk.count
                }
                #expect(received == total)
                #expect(inOrder)
                #expect(stream.pauseCount >= (total - BodyStream.defaultLimit) / (BodyStream.defaultLimit - BodyStream.defaultLowWater) / 2)
                #expect(stream.highWaterBytes <= BodyStream.defaultLimit)
                print("backpressure: 64 MiB streamed, \(stream.pauseCount) pauses, high water \(stream.highWaterBytes) bytes")
            }
            #expect(try await operation.response().status == .ok)
        }
    }

    /// 512 MiB streamed through `RequestQueue.stream` in flat memory, in a process of its own.
    @Test(.disabled(if: ProcessInfo.processInfo.environment["CURLQUEUE_SANITIZER"] != nil,
                    "a sanitizer's shadow memory makes RSS meaningless"))
    func aLargeStreamIsReceivedInFlatMemory() async throws {
        try await withServer { server in
            let size = 512 << 20
            let output = try await runBuiltProduct("MemoryProbe", ["--stream", server.url("/bytes/\(size)?chunked=1").absoluteString])
            #expect(output.hasPrefix("status=200 received=\(size) "), "\(output)")
            let peak = Int(output.split(separator: "peak=").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? .max
            #expect(peak < 64 << 20, "peak RSS \(peak >> 20) MiB")
            print("stream: \(size >> 20) MiB received, peak RSS \(peak >> 20) MiB")
        }
    }

    @Test func aHandlerThatFallsBehindPausesTheTransfer() async throws {
        try await withServer { server in
            let total = 8 * 1024 * 1024
            let callbacks = DispatchQueue(label: "StreamingTests.slow")
            callbacks.suspend()  // no handler runs until the transfer has paused
            let received = LockedBox((count: 0, inOrder: true))
            let paused = LockedBox<BodyStream?>(nil)  // the operation lets go of it at its end
            let operation = RequestOperation(request: Request(url: server.url("/bytes/\(total)?chunked=1")))
            operation.callbackQueue = callbacks
            operation.responseBodyHandler = { chunk in
                received.update { state in
                    state.inOrder = state.inOrder && Array(chunk) == FixtureServer.expectedBytes(offset: state.count, count: chunk.count)
                    state.count += chunk.count
                }
            }
            let result = try await within {
                await withCheckedContinuation { (continuation: CheckedContinuation<Result<Response, RequestError>, Never>) in
                    operation.completionHandler = { continuation.resume(returning: $0) }
                    try! operation.start()
                    Task {
                        let stream = operation.state.withLock { $0.bodyStream }!
                        paused.update { $0 = stream }
                        await stream.waitUntilPausedOrEnded()
                        #expect(stream.pauseCount == 1)
                        #expect(stream.outstandingBytes <= BodyStream.defaultLimit)
                        callbacks.resume()
                    }
                }
            }
            #expect(try result.get().status == .ok)
            #expect(received.value.count == total)
            #expect(received.value.inOrder)
            let stream = try #require(paused.value)
            #expect(stream.highWaterBytes <= BodyStream.defaultLimit)
        }
    }
}
