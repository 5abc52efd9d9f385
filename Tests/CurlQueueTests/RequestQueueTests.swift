import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// `RequestQueue` end to end against the fixture server, observed from the server's side
/// wherever it can be: what arrived, in which order, how many at once.
@Suite struct RequestQueueTests {
    static let modes: [RequestQueue.Mode] = [.firstInFirstOut, .lastInFirstOut]

    /// The outcome of an operation that was already added to a queue (or finished).
    func outcome(of operation: RequestOperation) async -> Result<Response, RequestError> {
        do {
            return .success(try await operation.response())
        } catch {
            return .failure(error)
        }
    }

    /// The URIs of the requests the server received whose path is `path`, in arrival order.
    func arrivals(_ server: FixtureServer, path: String) -> [String] {
        server.requests.filter { $0.path == path }.map(\.uri)
    }

    /// Runs `body` against a fixture server; a body that does not finish within `limit` fails
    /// the test instead of hanging the run (a queue that never starts an operation would
    /// leave `response()` or `waitUntilAllOperationsAreFinished()` waiting forever).
    ///
    /// With `warm` (the default), the engine has served one request to the server before
    /// `body` runs (so it holds a kept-alive connection there) and the server's statistics are
    /// reset. ``aFreshOriginGetsTheFullConcurrencyWhileItsFirstResponseIsSlow()`` covers the
    /// cold start.
    func withTestServer<T: Sendable>(
        warm: Bool = true,
        limit: Duration = .seconds(60),
        _ body: @escaping @Sendable (FixtureServer) async throws -> T
    ) async throws -> T {
        try await withServer { server in
            if warm {
                try await probe(server)
                server.resetStatistics()
            }
            let (outcomes, sink) = AsyncStream<Result<T, any Error>?>.makeStream()
            let work = Task {
                do {
                    sink.yield(.success(try await body(server)))
                } catch {
                    sink.yield(.failure(error))
                }
            }
            let watchdog = Task {
                try? await Task.sleep(for: limit)
                sink.yield(nil)
            }
            defer { watchdog.cancel() }
            var iterator = outcomes.makeAsyncIterator()
            guard let outcome = await iterator.next() ?? nil else {
                work.cancel()
                throw Overran(limit: limit)
            }
            return try outcome.get()
        }
    }

    struct Overran: Error, CustomStringConvertible {
        var limit: Duration
        var description: String { "the test did not finish within \(limit)" }
    }

    /// Proves the engine has served what was handed to it so far: a standalone request there
    /// and back. Anything a queue had started before this would have reached the server first.
    func probe(_ server: FixtureServer) async throws {
        _ = try await RequestOperation(request: Request(url: server.url("/bytes/7?probe"))).response()
    }

    // MARK: Order

    @Test(arguments: modes)
    func aBacklogReachesTheServerInTheOrderOfTheQueueMode(_ mode: RequestQueue.Mode) async throws {
        try await withTestServer { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 1, queueMode: mode)
            let hold = queue.add(Request(url: server.url("/gate/hold")))
            try await server.waitForRequests(pathPrefix: "/gate/hold", count: 1)
            let backlog = (0..<8).map { queue.add(Request(url: server.url("/bytes/4?i=\($0)"))) }
            server.openGate("hold")
            await queue.waitUntilAllOperationsAreFinished()
            let order = mode == .firstInFirstOut ? Array(0..<8) : Array((0..<8).reversed())
            let arrived = server.requests.filter { ["/gate/hold", "/bytes/4"].contains($0.path) }.map(\.uri)
            #expect(arrived == ["/gate/hold"] + order.map { "/bytes/4?i=\($0)" })
            for operation in [hold] + backlog {
                #expect(await outcome(of: operation).map(\.status) == .success(.ok))
            }
        }
    }

    @Test(arguments: modes)
    func higherPrioritiesReachTheServerFirstAndTheModeOrdersEachPriority(_ mode: RequestQueue.Mode) async throws {
        try await withTestServer { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 1, queueMode: mode)
            queue.add(Request(url: server.url("/gate/hold")))
            try await server.waitForRequests(pathPrefix: "/gate/hold", count: 1)
            let priorities: [RequestOperation.Priority] = [.low, .normal, .high, .low, .normal, .high]
            for (index, priority) in priorities.enumerated() {
                let operation = RequestOperation(request: Request(url: server.url("/bytes/4?\(priority)=\(index)")))
                operation.priority = priority
                try queue.add(operation)
            }
            server.openGate("hold")
            await queue.waitUntilAllOperationsAreFinished()
            let fifo = ["high=2", "high=5", "normal=1", "normal=4", "low=0", "low=3"]
            let lifo = ["high=5", "high=2", "normal=4", "normal=1", "low=3", "low=0"]
            #expect(arrivals(server, path: "/bytes/4") == (mode == .firstInFirstOut ? fifo : lifo).map { "/bytes/4?\($0)" })
        }
    }

    @Test func requestsListRunningOperationsThenPendingOnesInQueueOrder() async throws {
        try await withTestServer { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 2)
            #expect(queue.requests.isEmpty)
            #expect(queue.requestCount == 0)
            let first = Request(url: server.url("/gate/first"))
            let request = { (name: String) in Request(url: server.url("/gate/rest?op=\(name)")) }
            let running = queue.add(first)
            queue.add(request("running"))
            queue.add(request("pending0"))
            queue.add(request("pending1"))
            let urgent = RequestOperation(request: request("urgent"))
            urgent.priority = .high
            try queue.add(urgent)
            #expect(queue.requests == [first] + ["running", "urgent", "pending0", "pending1"].map(request))
            #expect(queue.requestCount == 5)
            #expect(queue.operations.map(\.request) == queue.requests)

            queue.cancel(request("pending0"))
            #expect(queue.requests == [first] + ["running", "urgent", "pending1"].map(request))
            #expect(queue.requestCount == 4)

            try await server.waitForRequests(pathPrefix: "/gate/first", count: 1)
            server.openGate("first")
            _ = try await running.response()
            // The urgent one took the free slot: it now runs, after the one that started earlier.
            #expect(queue.requests == ["running", "urgent", "pending1"].map(request))
            #expect(queue.requestCount == 3)

            server.openGate("rest")
            await queue.waitUntilAllOperationsAreFinished()
            #expect(queue.requests.isEmpty)
            #expect(queue.requestCount == 0)
        }
    }

    // MARK: Limits

    @Test func aThousandOperationsNeverRunMoreThanTheLimitAtOnce() async throws {
        try await withTestServer { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 8)
            let failures = LockedBox(0)
            for index in 0..<1000 {
                // The first eight wait on a gate: all of them arrive only if eight run at once.
                let path = index < 8 ? "/gate/first?i=\(index)" : "/bytes/16?delay=1&i=\(index)"
                queue.add(Request(url: server.url(path))) { result in
                    if (try? result.get())?.status != .ok { failures.update { $0 += 1 } }
                }
            }
            try await server.waitForRequests(pathPrefix: "/gate/first", count: 8)
            #expect(queue.requestCount == 1000)
            server.openGate("first")
            await queue.waitUntilAllOperationsAreFinished()
            #expect(server.peakConcurrency == 8)
            #expect(arrivals(server, path: "/gate/first").count + arrivals(server, path: "/bytes/16").count == 1000)
            await drain()
            #expect(failures.value == 0)
        }
    }

    @Test func handlersOnTheDefaultQueueRunInTheOrderTheOperationsFinished() async throws {
        // One slot, first in first out: the operations finish in order, and their handlers must
        // run in that order and one at a time on the serial default queue, whether a turn hands
        // over one handler (as it is) or several (in one block). Every third handler is slow
        // (2 ms of work, a GET here takes about 0.1), so that completions pile up behind it: a
        // handler sent anywhere but that serial queue would overtake it.
        try await withTestServer { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 1)
            let order = LockedBox([Int]())
            let running = LockedBox(0)
            let overlaps = LockedBox(0)
            let (allRan, allRanSignal) = AsyncStream<Void>.makeStream()
            for index in 0..<300 {
                queue.add(Request(string: server.url("/bytes/16").absoluteString + "?i=\(index)")) { _ in
                    if running.update({ $0 += 1; return $0 }) > 1 { overlaps.update { $0 += 1 } }
                    if index.isMultiple(of: 3) { usleep(2_000) }
                    running.update { $0 -= 1 }
                    if order.update({ $0.append(index); return $0.count }) == 300 { allRanSignal.finish() }
                }
            }
            for await _ in allRan {}
            #expect(order.value == Array(0..<300))
            #expect(overlaps.value == 0)
        }
    }

    @Test func perHostLimitsCountEachOriginApartAndRaisingThemStartsParkedOperations() async throws {
        try await withTestServer { one in
            try await withTestServer { two in  // same host, another port: another origin
                let queue = RequestQueue(maxConcurrentRequestCount: 0)
                queue.maxConcurrentRequestsPerHost = 2
                for server in [one, two] {
                    for index in 0..<5 { queue.add(Request(url: server.url("/gate/g?i=\(index)"))) }
                }
                // Two per origin run together: four at once in all.
                try await one.waitForRequests(pathPrefix: "/gate/g", count: 2)
                try await two.waitForRequests(pathPrefix: "/gate/g", count: 2)
                try await probe(one)
                try await probe(two)
                #expect(arrivals(one, path: "/gate/g").count == 2)
                #expect(arrivals(two, path: "/gate/g").count == 2)
                #expect(queue.requestCount == 10)

                queue.maxConcurrentRequestsPerHost = 3
                try await one.waitForRequests(pathPrefix: "/gate/g", count: 3)
                try await two.waitForRequests(pathPrefix: "/gate/g", count: 3)
                one.openGate("g")
                two.openGate("g")
                await queue.waitUntilAllOperationsAreFinished()
                for server in [one, two] {
                    #expect(arrivals(server, path: "/gate/g").count == 5)
                    #expect(server.peakConcurrency == 3)
                }
            }
        }
    }

    @Test func raisingTheLimitMidRunStartsMoreAtOnceAndLoweringItLetsRunningOnesFinish() async throws {
        try await withTestServer { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 2)
            let first = (0..<4).map { queue.add(Request(url: server.url("/gate/a?i=\($0)"))) }
            let later = (0..<2).map { queue.add(Request(url: server.url("/gate/b?i=\($0)"))) }
            try await server.waitForRequests(pathPrefix: "/gate/a", count: 2)
            // Nothing can finish while gate a is closed: only the raise can start two more.
            queue.maxConcurrentRequestCount = 4
            try await server.waitForRequests(pathPrefix: "/gate/a", count: 4)

            queue.maxConcurrentRequestCount = 1
            server.openGate("a")
            for operation in first {  // nothing running is stopped
                #expect(await outcome(of: operation).map(\.status) == .success(.ok))
            }
            try await server.waitForRequests(pathPrefix: "/gate/b", count: 1)
            server.resetStatistics()  // the peak starts again from what is in flight now
            server.openGate("b")
            await queue.waitUntilAllOperationsAreFinished()
            #expect(server.peakConcurrency == 1)
            for operation in later {
                #expect(await outcome(of: operation).map(\.status) == .success(.ok))
            }
        }
    }

    // MARK: Suspension

    @Test func suspensionHoldsNewStartsWhileRunningOperationsFinish() async throws {
        try await withTestServer { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 2)
            let running = queue.add(Request(url: server.url("/gate/run")))
            try await server.waitForRequests(pathPrefix: "/gate/run", count: 1)
            queue.isSuspended = true
            let held = (0..<2).map { queue.add(Request(url: server.url("/bytes/11?held=\($0)"))) }
            server.openGate("run")
            #expect(try await running.response().status == .ok)  // running ones go on
            // The engine is alive and has served everything it was given: nothing held came.
            try await probe(server)
            #expect(arrivals(server, path: "/bytes/11").isEmpty)
            #expect(queue.requestCount == 2)
            #expect(held.allSatisfy { !$0.isFinished })

            queue.isSuspended = false
            try await server.waitForRequests(pathPrefix: "/bytes/11", count: 2)
            for operation in held {
                #expect(try await operation.response().status == .ok)
            }
        }
    }

    @Test func resumingStartsPendingOperationsAtOnce() async throws {
        try await withTestServer { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 3)
            queue.isSuspended = true
            #expect(queue.isSuspended)
            let operations = (0..<4).map { queue.add(Request(url: server.url("/gate/r?i=\($0)"))) }
            try await probe(server)
            #expect(arrivals(server, path: "/gate/r").isEmpty)

            queue.isSuspended = false
            // Three arrive while the gate is closed: nothing but the resume could start them.
            try await server.waitForRequests(pathPrefix: "/gate/r", count: 3)
            server.openGate("r")
            await queue.waitUntilAllOperationsAreFinished()
            #expect(arrivals(server, path: "/gate/r").count == 4)
            #expect(server.peakConcurrency == 3)
            #expect(operations.allSatisfy { $0.isFinished && !$0.isCancelled })
        }
    }

    // MARK: Duplicates and cancelling

    @Test func aDuplicateRequestCancelsTheEarlierOperationByDefault() async throws {
        try await withTestServer { server in
            let queue = RequestQueue()
            #expect(!queue.allowDuplicateRequests)
            let running = queue.add(Request(url: server.url("/gate/dup")))
            try await server.waitForRequests(pathPrefix: "/gate/dup", count: 1)
            let replacement = queue.add(Request(url: server.url("/gate/dup")))  // another instance, equal by value
            #expect(await outcome(of: running).failure == .cancelled)
            server.openGate("dup")
            #expect(try await replacement.response().status == .ok)

            // A pending duplicate leaves at once.
            queue.isSuspended = true
            let pending = queue.add(Request(url: server.url("/bytes/3")))
            let newer = queue.add(Request(url: server.url("/bytes/3")))
            #expect(pending.isCancelled)
            #expect(queue.requestCount == 1)
            #expect(queue.operations.first === newer)
            queue.isSuspended = false
            #expect(try await newer.response().bodyBytes == FixtureServer.expectedBytes(count: 3))
            #expect(arrivals(server, path: "/bytes/3").count == 1)
        }
    }

    @Test func allowingDuplicateRequestsKeepsEveryOperation() async throws {
        try await withTestServer { server in
            let queue = RequestQueue()
            queue.allowDuplicateRequests = true
            let operations = (0..<2).map { _ in queue.add(Request(url: server.url("/gate/dup"))) }
            try await server.waitForRequests(pathPrefix: "/gate/dup", count: 2)
            #expect(queue.requestCount == 2)
            server.openGate("dup")
            for operation in operations {
                #expect(try await operation.response().status == .ok)
            }
        }
    }

    /// Thousands of equal requests on a queue that allows them: cancelling some from the middle
    /// and out of order takes just those out, and a newer equal request added once duplicates
    /// are no longer allowed cancels every earlier one still there, in the order they were
    /// added. (Nothing starts: the queue is suspended, and no server is needed.)
    @Test func manyEqualRequestsLeaveInTheOrderDuplicateCancellationPromises() async {
        let queue = RequestQueue(maxConcurrentRequestCount: 1)
        queue.allowDuplicateRequests = true
        queue.isSuspended = true
        let request = Request(url: URL(string: "http://127.0.0.1:1/same")!)
        let count = 3_000
        let (outcomes, sink) = AsyncStream<(Int, Bool)>.makeStream()
        let operations = (0..<count).map { i in
            queue.add(request) { result in sink.yield((i, result.failure == .cancelled)) }
        }
        let cancelledFirst = (0..<count / 3).map { (($0 * 7) + count / 2) % count }  // from the middle, out of order
        for i in cancelledFirst { operations[i].cancel() }
        let cancelledSet = Set(cancelledFirst)
        let left = (0..<count).filter { !cancelledSet.contains($0) }
        #expect(queue.operations.map(ObjectIdentifier.init) == left.map { ObjectIdentifier(operations[$0]) })

        queue.allowDuplicateRequests = false
        let newest = queue.add(Request(url: URL(string: "http://127.0.0.1:1/same")!))  // equal by value
        #expect(queue.operations.map(ObjectIdentifier.init) == [ObjectIdentifier(newest)])
        // Completion handlers run on one serial queue in the order the outcomes were decided.
        var order: [Int] = []
        for await (i, cancelled) in outcomes {
            #expect(cancelled)
            order.append(i)
            if order.count == count { break }
        }
        #expect(order == cancelledFirst + left)
        newest.cancel()
        await queue.waitUntilAllOperationsAreFinished()
    }

    @Test func cancellingARequestByValueCancelsEqualPendingAndRunningOperations() async throws {
        try await withTestServer { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 1)
            queue.allowDuplicateRequests = true
            let events = queue.events()
            let running = queue.add(Request(url: server.url("/gate/x")))
            try await server.waitForRequests(pathPrefix: "/gate/x", count: 1)
            let pending = (0..<20).map { _ in queue.add(Request(url: server.url("/gate/x"))) }
            let other = queue.add(Request(url: server.url("/bytes/5")))

            queue.cancel(Request(url: server.url("/gate/x")))  // another instance, equal by value
            #expect(pending.allSatisfy { $0.isCancelled })  // pending ones: at once
            for operation in pending {
                #expect(await outcome(of: operation).failure == .cancelled)
            }
            #expect(await outcome(of: running).failure == .cancelled)
            #expect(try await other.response().bodyBytes == FixtureServer.expectedBytes(count: 5))
            // The slot the running one freed never went to one of the cancelled ones.
            var started: [ObjectIdentifier] = []
            loop: for await event in events {
                switch event {
                case .started(let operation):
                    started.append(ObjectIdentifier(operation))
                case .finished(let operation, _) where operation === other:
                    break loop
                default:
                    break
                }
            }
            #expect(started == [ObjectIdentifier(running), ObjectIdentifier(other)])
            #expect(arrivals(server, path: "/gate/x").count == 1)
            #expect(queue.requestCount == 0)
        }
    }

    @Test func theSlotFreedByCancellingByValueNeverGoesToAnOperationBeingCancelled() async throws {
        try await withTestServer { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 1)
            queue.allowDuplicateRequests = true
            let events = queue.events()
            let request = Request(url: server.url("/flaky/wait?failures=100&status=503"))
            // Waiting out a retry backoff keeps the slot, and cancelling frees it at once.
            let waiting = RequestOperation(request: request)
            waiting.autoRetry = true
            waiting.retryPolicy = RetryPolicy(initialBackoff: .seconds(30), maxBackoff: .seconds(30), retryableStatuses: [503])
            try queue.add(waiting)
            let pending = (0..<3).map { _ in queue.add(request) }
            let other = queue.add(Request(url: server.url("/bytes/5")))
            var started: [ObjectIdentifier] = []
            var iterator = events.makeAsyncIterator()
            while let event = await iterator.next() {
                if case .started(let operation) = event { started.append(ObjectIdentifier(operation)) }
                if case .retrying(let operation, _, _) = event, operation === waiting { break }
            }

            queue.cancel(Request(url: server.url("/flaky/wait?failures=100&status=503")))
            #expect(waiting.isCancelled)
            #expect(pending.allSatisfy { $0.isCancelled })
            #expect(try await other.response().status == .ok)
            while let event = await iterator.next() {
                if case .started(let operation) = event { started.append(ObjectIdentifier(operation)) }
                if case .finished(let operation, _) = event, operation === other { break }
            }
            #expect(started == [ObjectIdentifier(waiting), ObjectIdentifier(other)])
            #expect(server.hits("wait") == 1)
        }
    }

    @Test func theSlotFreedByCancellingDuplicatesGoesToTheNewOperation() async throws {
        try await withTestServer { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 1)
            queue.allowDuplicateRequests = true
            let events = queue.events()
            let request = Request(url: server.url("/flaky/dup?failures=100&status=503"))
            let waiting = RequestOperation(request: request)  // keeps its slot while it waits to retry
            waiting.autoRetry = true
            waiting.retryPolicy = RetryPolicy(initialBackoff: .seconds(30), maxBackoff: .seconds(30), retryableStatuses: [503])
            try queue.add(waiting)
            let older = queue.add(request)
            var started: [ObjectIdentifier] = []
            var iterator = events.makeAsyncIterator()
            while let event = await iterator.next() {
                if case .started(let operation) = event { started.append(ObjectIdentifier(operation)) }
                if case .retrying(let operation, _, _) = event, operation === waiting { break }
            }

            queue.allowDuplicateRequests = false
            let newest = queue.add(request)  // no autoRetry: the 503 is its response
            #expect(waiting.isCancelled)
            #expect(older.isCancelled)
            #expect(try await newest.response().status == .serviceUnavailable)
            while let event = await iterator.next() {
                if case .started(let operation) = event { started.append(ObjectIdentifier(operation)) }
                if case .finished(let operation, _) = event, operation === newest { break }
            }
            #expect(started == [ObjectIdentifier(waiting), ObjectIdentifier(newest)])
            #expect(server.hits("dup") == 2)
        }
    }

    @Test func cancelAllRequestsCompletesTenThousandOperationsExactlyOnceAsCancelled() async throws {
        try await withTestServer { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 2)
            let total = 10_002
            let (outcomes, sink) = AsyncStream<(Int, Result<Response, RequestError>)>.makeStream()
            func add(_ index: Int, _ path: String) {
                queue.add(Request(url: server.url(path))) { sink.yield((index, $0)) }
            }
            add(0, "/gate/all?i=0")
            add(1, "/gate/all?i=1")
            try await server.waitForRequests(pathPrefix: "/gate/all", count: 2)
            queue.isSuspended = true
            for index in 2..<total { add(index, "/bytes/1?i=\(index)") }
            #expect(queue.requestCount == total)

            queue.cancelAllRequests()
            var calls = [Int](repeating: 0, count: total)
            var notCancelled = 0
            var received = 0
            var iterator = outcomes.makeAsyncIterator()
            while received < total, let (index, result) = await iterator.next() {
                calls[index] += 1
                if result.failure != .cancelled { notCancelled += 1 }
                received += 1
            }
            #expect(queue.requestCount == 0)
            await drain()
            sink.finish()
            while let (index, _) = await iterator.next() { calls[index] += 1 }
            #expect(calls.allSatisfy { $0 == 1 })
            #expect(notCancelled == 0)
            #expect(arrivals(server, path: "/bytes/1").isEmpty)
        }
    }

    // MARK: Handlers and misuse

    @Test func completionHandlersMayAddAndCancelOperationsOfTheirQueue() async throws {
        try await withTestServer { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 2)
            let victim = queue.add(Request(url: server.url("/gate/victim")))
            let trigger = RequestOperation(request: Request(url: server.url("/gate/trigger")))
            try queue.add(trigger)
            try await server.waitForRequests(pathPrefix: "/gate/", count: 2)
            queue.isSuspended = true
            let pending = queue.add(Request(url: server.url("/bytes/3?pending")))
            let added = await withCheckedContinuation { continuation in
                trigger.completionHandler = { _ in
                    queue.cancel(pending.request)  // pending
                    victim.cancel()  // running
                    let added = queue.add(Request(url: server.url("/bytes/9?added")))
                    queue.isSuspended = false
                    continuation.resume(returning: added)
                }
                server.openGate("trigger")
            }
            #expect(try await added.response().bodyBytes == FixtureServer.expectedBytes(count: 9))
            #expect(await outcome(of: pending).failure == .cancelled)
            #expect(await outcome(of: victim).failure == .cancelled)
            await queue.waitUntilAllOperationsAreFinished()
            #expect(arrivals(server, path: "/bytes/3").isEmpty)
        }
    }

    @Test func addingAnOperationThatWasAddedOrStartedBeforeThrows() async throws {
        try await withTestServer { server in
            let queue = RequestQueue()
            let other = RequestQueue()
            queue.isSuspended = true
            let queued = RequestOperation(request: Request(url: server.url("/bytes/1")))
            try queue.add(queued)
            #expect(throws: RequestOperationError.alreadyStarted) { try queue.add(queued) }
            #expect(throws: RequestOperationError.alreadyStarted) { try other.add(queued) }
            #expect(throws: RequestOperationError.alreadyStarted) { try queued.start() }

            let standalone = RequestOperation(request: Request(url: server.url("/gate/alone")))
            try standalone.start()
            #expect(throws: RequestOperationError.alreadyStarted) { try queue.add(standalone) }
            #expect(queue.requestCount == 1)
            #expect(other.requestCount == 0)

            server.openGate("alone")
            _ = try await standalone.response()
            #expect(throws: RequestOperationError.alreadyStarted) { try other.add(standalone) }
            queue.isSuspended = false
            _ = try await queued.response()
            #expect(throws: RequestOperationError.alreadyStarted) { try queue.add(queued) }
            #expect(queue.requestCount == 0)
            #expect(arrivals(server, path: "/bytes/1").count == 1)
        }
    }

    // MARK: API

    @Test func aNewQueueHasTheSeedsDefaults() {
        let queue = RequestQueue()
        #expect(queue.maxConcurrentRequestCount == 2)
        #expect(queue.maxConcurrentRequestsPerHost == 0)
        #expect(queue.queueMode == .firstInFirstOut)
        #expect(!queue.isSuspended)
        #expect(!queue.allowDuplicateRequests)
        #expect(queue.requestCount == 0)
        queue.maxConcurrentRequestCount = -3
        #expect(queue.maxConcurrentRequestCount == 0)
    }

    @Test func mainIsOneSharedQueue() async throws {
        let seen = await withTaskGroup(of: ObjectIdentifier.self) { group in
            for _ in 0..<8 {
                group.addTask { ObjectIdentifier(RequestQueue.main) }
            }
            return await Set(group.reduce(into: []) { $0.append($1) })
        }
        #expect(seen == [ObjectIdentifier(RequestQueue.main)])
        try await withTestServer(warm: false) { server in
            let response = try await RequestQueue.main.response(for: Request(url: server.url("/bytes/5")))
            #expect(response.bodyBytes == FixtureServer.expectedBytes(count: 5))
        }
    }

    @Test func responseForARequestAwaitsItsOutcomeAndCancellingTheTaskCancelsIt() async throws {
        try await withTestServer { server in
            let queue = RequestQueue()
            let response = try await queue.response(for: Request(url: server.url("/bytes/64")))
            #expect(response.bodyBytes == FixtureServer.expectedBytes(count: 64))
            #expect(try await queue.response(for: Request(url: server.url("/status/404"))).status == .notFound)

            queue.isSuspended = true
            let events = queue.events()
            let task = Task { try await queue.response(for: Request(url: server.url("/bytes/2?never"))) }
            for await event in events {
                if case .added = event { break }
            }
            task.cancel()
            await #expect(throws: RequestError.cancelled) { try await task.value }
            #expect(queue.requestCount == 0)
            queue.isSuspended = false
            try await probe(server)
            #expect(arrivals(server, path: "/bytes/2").isEmpty)
        }
    }

    @Test func waitUntilAllOperationsAreFinishedReturnsOnceTheQueueIsEmpty() async throws {
        try await withTestServer { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 2)
            await queue.waitUntilAllOperationsAreFinished()  // empty: returns at once
            let first = queue.add(Request(url: server.url("/gate/first")))
            try await server.waitForRequests(pathPrefix: "/gate/first", count: 1)
            queue.isSuspended = true
            let operations = [first] + (1..<5).map { index in
                queue.add(Request(url: server.url(index < 3 ? "/gate/later?i=\(index)" : "/bytes/8?i=\(index)")))
            }
            let waiters = (0..<2).map { _ in
                Task {
                    await queue.waitUntilAllOperationsAreFinished()
                    return (operations.allSatisfy(\.isFinished), queue.requestCount)
                }
            }
            // For a while nothing runs (suspended, the running one done), yet the queue is not empty.
            server.openGate("first")
            _ = try await first.response()
            queue.isSuspended = false
            try await server.waitForRequests(pathPrefix: "/gate/later", count: 2)
            server.openGate("later")
            for waiter in waiters {
                let (allFinished, count) = await waiter.value
                #expect(allFinished)
                #expect(count == 0)
            }
        }
    }

    /// A queue made for a batch and dropped at once, as a function that adds its downloads and
    /// returns does: its pending operations still start, and every one completes. (They were
    /// dropped with the queue, never started, and their awaiting tasks waited forever.) Once
    /// empty, the queue goes away.
    @Test func aQueueNobodyKeepsRunsItsOperationsToTheEndAndThenGoesAway() async throws {
        try await withTestServer(limit: .seconds(15)) { server in
            weak var released: RequestQueue?
            let operations = {
                let queue = RequestQueue(maxConcurrentRequestCount: 1)
                released = queue
                return (0..<3).map { queue.add(Request(url: server.url("/gate/orphans?i=\($0)"))) }
            }()
            try await server.waitForRequests(pathPrefix: "/gate/orphans", count: 1)
            server.openGate("orphans")
            for operation in operations {
                #expect(try await operation.response().status == .ok)
            }
            #expect(arrivals(server, path: "/gate/orphans").count == 3)
            #expect(released == nil, "the queue outlived its last operation")
        }
    }

    @Test func eventsFollowAnOperationFromAddedToFinished() async throws {
        // A fresh connection: libcurl silently resends once on a reused one that the server closed.
        try await withTestServer(warm: false) { server in
            let queue = RequestQueue()
            let events = queue.events()
            let operation = RequestOperation(request: Request(url: server.url("/flaky/life?failures=1&mode=close&bytes=100000")))
            operation.autoRetry = true
            operation.retryPolicy = RetryPolicy(maxAttempts: 3, initialBackoff: .milliseconds(10), maxBackoff: .milliseconds(20))
            try queue.add(operation)
            var seen: [String] = []
            var outcome: Result<Response, RequestError>?
            loop: for await event in events {
                switch event {
                case .added(let subject) where subject === operation:
                    seen.append("added")
                case .started(let subject) where subject === operation:
                    seen.append("started")
                case .progress(let subject, _, _) where subject === operation:
                    if seen.last != "progress" { seen.append("progress") }
                case .retrying(let subject, let attempt, _) where subject === operation:
                    seen.append("retrying \(attempt)")
                case .finished(let subject, let result) where subject === operation:
                    seen.append("finished")
                    outcome = result
                    break loop
                default:
                    break
                }
            }
            // The failed first attempt may or may not get to report progress.
            #expect(seen.filter { $0 != "progress" } == ["added", "started", "retrying 2", "finished"])
            #expect(seen.suffix(2) == ["progress", "finished"])
            let response = try #require(try outcome?.get())
            #expect(response.attempts == 2)
            #expect(response.body.count == 100_000)
            #expect(server.hits("life") == 2)
        }
    }

    /// A stream sees the events of the operations added after it was made, and only theirs,
    /// as `events()` says: an operation already in the queue (added while another stream
    /// listened) showed up in it half-way, with a `.finished` whose `.added` it never had, and
    /// a dashboard counting added minus finished went below zero.
    @Test func aStreamSeesOnlyTheOperationsAddedAfterItWasMade() async throws {
        try await withTestServer { server in
            let queue = RequestQueue()
            let early = queue.events()
            let before = queue.add(Request(url: server.url("/gate/before")))
            try await server.waitForRequests(pathPrefix: "/gate/before", count: 1)
            let late = queue.events()
            let after = queue.add(Request(url: server.url("/bytes/10?after")))
            _ = try await after.response()
            server.openGate("before")
            _ = try await before.response()
            // Its `.finished` was published before its outcome was handed over: anything of it
            // in a stream comes before the marker's events.
            let marker = queue.add(Request(url: server.url("/bytes/10?marker")))
            _ = try await marker.response()

            func events(_ stream: AsyncStream<RequestQueue.Event>) async -> [(RequestOperation, String)] {
                var seen: [(RequestOperation, String)] = []
                for await event in stream {
                    switch event {
                    case .added(let subject): seen.append((subject, "added"))
                    case .started(let subject): seen.append((subject, "started"))
                    case .progress: break
                    case .retrying(let subject, _, _): seen.append((subject, "retrying"))
                    case .finished(let subject, _):
                        seen.append((subject, "finished"))
                        if subject === marker { return seen }
                    }
                }
                return seen
            }
            let lateEvents = await events(late)
            #expect(!lateEvents.contains { $0.0 === before }, "\(lateEvents.filter { $0.0 === before }.map(\.1))")
            #expect(lateEvents.filter { $0.0 === after }.map(\.1) == ["added", "started", "finished"])
            let earlyEvents = await events(early)
            #expect(earlyEvents.filter { $0.0 === before }.map(\.1) == ["added", "started", "finished"])
            #expect(earlyEvents.filter { $0.0 === after }.map(\.1) == ["added", "started", "finished"])
        }
    }

    @Test func queuesShareOneEngineAndItsConnections() async throws {
        try await withTestServer(warm: false) { server in
            let one = RequestQueue(maxConcurrentRequestCount: 2)
            let two = RequestQueue(maxConcurrentRequestCount: 2)
            for index in 0..<6 {
                let queue = index.isMultiple(of: 2) ? one : two
                _ = try await queue.response(for: Request(url: server.url("/bytes/32?q=\(index % 2)&n=\(index)")))
            }
            // Connections as the server saw them (not `connectionsAccepted`, which a stray
            // client of another test could bump): each queue reused the other's connection.
            let sequential = server.requests.filter { $0.path == "/bytes/32" }
            let ofOne = Set(sequential.filter { $0.uri.contains("q=0") }.map(\.connectionID))
            let ofTwo = Set(sequential.filter { $0.uri.contains("q=1") }.map(\.connectionID))
            #expect(!ofOne.isDisjoint(with: ofTwo))
            // One for all six. The engine's connection cache serves the whole parallel suite;
            // it keeps room for idle connections however many other tests' transfers are busy
            // (ConnectionCacheTests), so a burst elsewhere no longer evicts this one.
            #expect(ofOne.union(ofTwo).count == 1, "\(ofOne.union(ofTwo).count) connections for six requests in turn")

            // Both queues at full concurrency: four connections at most, not one per request.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<40 {
                    let queue = index.isMultiple(of: 2) ? one : two
                    group.addTask {
                        _ = try await queue.response(for: Request(url: server.url("/bytes/33?delay=2&m=\(index)")))
                    }
                }
                try await group.waitForAll()
            }
            let concurrent = server.requests.filter { $0.path == "/bytes/33" }
            #expect(concurrent.count == 40)
            let connections = Set(concurrent.map(\.connectionID)).count
            #expect(connections <= 4, "\(connections) connections for 40 requests at a concurrency of 4")
            #expect(server.peakConcurrency <= 4)
        }
    }

    @Test func aFreshOriginGetsTheFullConcurrencyWhileItsFirstResponseIsSlow() async throws {
        try await withTestServer(warm: false) { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 2)
            queue.add(Request(url: server.url("/gate/fresh?i=0")))
            queue.add(Request(url: server.url("/gate/fresh?i=1")))
            // With PIPEWAIT on plain http the second transfer would wait for the first response.
            try await server.waitForRequests(pathPrefix: "/gate/fresh", count: 2)
            server.openGate("fresh")
            await queue.waitUntilAllOperationsAreFinished()
            #expect(arrivals(server, path: "/gate/fresh").count == 2)
        }
    }

    // MARK: Regressions of the seed's defects

    /// (a) A cancelled pending operation leaves at once and holds no slot: the queue does not shrink.
    @Test func aCancelledPendingOperationLeavesAtOnceAndTheQueueKeepsItsFullConcurrency() async throws {
        try await withTestServer { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 2)
            let running = (0..<2).map { queue.add(Request(url: server.url("/gate/a?i=\($0)"))) }
            let pending = (0..<6).map { queue.add(Request(url: server.url("/gate/b?i=\($0)"))) }
            for operation in pending.prefix(3) { operation.cancel() }
            #expect(queue.requestCount == 5)
            #expect(queue.requests == (running + pending.suffix(3)).map(\.request))
            for operation in pending.prefix(3) {
                #expect(await outcome(of: operation).failure == .cancelled)
            }

            try await server.waitForRequests(pathPrefix: "/gate/a", count: 2)
            server.openGate("a")
            // Both freed slots go to live operations: two arrive together while gate b is closed.
            try await server.waitForRequests(pathPrefix: "/gate/b", count: 2)
            #expect(Set(arrivals(server, path: "/gate/b")) == ["/gate/b?i=3", "/gate/b?i=4"])
            server.openGate("b")
            await queue.waitUntilAllOperationsAreFinished()
            #expect(Set(arrivals(server, path: "/gate/b")) == ["/gate/b?i=3", "/gate/b?i=4", "/gate/b?i=5"])
            #expect(server.peakConcurrency == 2)
        }
    }

    /// (b) cancel() after completion calls nothing.
    @Test func cancelAfterCompletionInAQueueDoesNotCallTheHandlerAgain() async throws {
        try await withTestServer { server in
            let queue = RequestQueue()
            let calls = LockedBox(0)
            let operation = RequestOperation(request: Request(url: server.url("/bytes/3")))
            let result = await withCheckedContinuation { continuation in
                operation.completionHandler = { result in
                    if calls.update({ $0 += 1; return $0 }) == 1 { continuation.resume(returning: result) }
                }
                try! queue.add(operation)
            }
            #expect(result.map(\.status) == .success(.ok))
            operation.cancel()
            queue.cancel(operation.request)
            queue.cancelAllRequests()
            operation.cancel()
            await drain()
            #expect(calls.value == 1)
            #expect(!operation.isCancelled)
            #expect(await outcome(of: operation).map(\.status) == .success(.ok))
        }
    }

    /// (c) autoRetry stops at the policy's maxAttempts.
    @Test func autoRetryInAQueueStopsAtMaxAttempts() async throws {
        // A fresh connection: libcurl silently resends once on a reused one that the server closed.
        try await withTestServer(warm: false) { server in
            let queue = RequestQueue()
            let operation = RequestOperation(request: Request(url: server.url("/flaky/endless?failures=100&mode=close")))
            operation.autoRetry = true
            operation.retryPolicy = RetryPolicy(maxAttempts: 3, initialBackoff: .milliseconds(10), maxBackoff: .milliseconds(20))
            try queue.add(operation)
            let result = await outcome(of: operation)
            #expect(result.failure?.transportFailure != nil)
            #expect(server.hits("endless") == 3)
            #expect(queue.requestCount == 0)
        }
    }

    /// (d) Progress of a body of unknown length has no fraction: never a division by zero, never NaN.
    @Test func progressOfAnUnknownLengthHasNoFractionAndIsNeverNaN() async throws {
        try await withTestServer { server in
            let queue = RequestQueue()
            let events = queue.events()
            let operation = RequestOperation(request: Request(url: server.url("/bytes/200000?chunked=1&drip=10&chunk=20000")))
            let reports = LockedBox([TransferProgress]())
            operation.downloadProgressHandler = { progress in reports.update { $0.append(progress) } }
            let (completions, sink) = AsyncStream<Result<Response, RequestError>>.makeStream()
            operation.completionHandler = { sink.yield($0) }
            try queue.add(operation)
            var observed: [TransferProgress] = []
            loop: for await event in events {
                switch event {
                case .progress(let subject, let download, _) where subject === operation:
                    observed.append(download)
                case .finished(let subject, _) where subject === operation:
                    break loop
                default:
                    break
                }
            }
            // The handler runs after every progress call (one serial callback queue).
            var iterator = completions.makeAsyncIterator()
            let result = await iterator.next()
            #expect(try result?.get().body.count == 200_000)
            #expect(observed.contains { $0.bytesTransferred > 0 })
            #expect(observed.allSatisfy { $0.totalBytes == nil && $0.fraction == nil })
            let values = reports.value
            #expect(values.allSatisfy { $0.fraction.map { $0.isFinite && (0...1).contains($0) } ?? true })
            #expect(values.dropLast().allSatisfy { $0.fraction == nil })
            #expect(values.last?.fraction == 1)
        }
    }

    /// (e) Duplicate detection and cancel(_:) agree on which requests are equal.
    @Test func duplicateDetectionAndCancelByRequestUseTheSameValueEquality() async throws {
        try await withTestServer { server in
            func request(_ variant: String) -> Request {
                var request = Request(url: server.url("/echo"), method: .post, body: .bytes(Data("body".utf8)))
                request.addHeader("X-Variant", variant)
                return request
            }
            let queue = RequestQueue()
            queue.isSuspended = true
            let first = queue.add(request("a"))
            let variant = queue.add(request("b"))  // one header differs: not a duplicate
            #expect(!first.isFinished)
            let second = queue.add(request("a"))  // equal by value: the first is cancelled at once
            #expect(first.isCancelled)
            #expect(!variant.isFinished)
            #expect(queue.requests == [request("b"), request("a")])

            queue.cancel(request("a"))  // a third instance, equal by value
            #expect(second.isCancelled)
            #expect(!variant.isFinished)
            #expect(queue.requests == [request("b")])

            queue.isSuspended = false
            let response = try await variant.response()
            #expect(response.status == .ok)
            #expect(await outcome(of: first).failure == .cancelled)
            #expect(await outcome(of: second).failure == .cancelled)
            #expect(server.requests.filter { $0.path == "/echo" }.map { $0.header("X-Variant") } == ["b"])
        }
    }
}
