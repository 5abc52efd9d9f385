import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// `RequestQueue.responses(for:)`: a batch's outcomes to one iterating task, against the
/// fixture server.
@Suite struct RequestQueueResponsesTests {
    /// Every outcome of `responses`, in the order it yields them.
    func collect(_ responses: RequestQueue.Responses) async -> [RequestQueue.Responses.Outcome] {
        var outcomes: [RequestQueue.Responses.Outcome] = []
        for await outcome in responses { outcomes.append(outcome) }
        return outcomes
    }

    func isCancelled(_ result: Result<Response, RequestError>) -> Bool {
        if case .failure(.cancelled) = result { return true }
        return false
    }

    @Test func everyRequestYieldsOneOutcomeWithItsIndexAndItsOwnBody() async throws {
        try await withServer { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 4)
            let requests = (0..<40).map { Request(url: server.url("/bytes/\(100 + $0)?i=\($0)")) }
            let responses = queue.responses(for: requests)
            #expect(responses.count == 40)
            let outcomes = await collect(responses)
            #expect(outcomes.map(\.index).sorted() == Array(0..<40))
            for outcome in outcomes {
                #expect(outcome.request == requests[outcome.index])
                let response = try outcome.result.get()
                #expect(response.status == .ok)
                #expect(response.body == Data(FixtureServer.expectedBytes(count: 100 + outcome.index)))
            }
            #expect(server.requests.filter { $0.path.hasPrefix("/bytes/") }.count == 40)
            #expect(server.peakConcurrency <= 4)
            #expect(queue.requestCount == 0)
        }
    }

    @Test func outcomesComeInTheOrderTheOperationsFinish() async throws {
        try await withServer { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 3)
            let responses = queue.responses(for: [
                Request(url: server.url("/gate/first")),
                Request(url: server.url("/gate/second")),
                Request(url: server.url("/bytes/3")),
            ])
            var iterator = responses.makeAsyncIterator()
            #expect(await iterator.next()?.index == 2)  // the only one the server answers at once
            try await server.waitForRequests(pathPrefix: "/gate/", count: 2)
            server.openGate("second")
            #expect(await iterator.next()?.index == 1)
            server.openGate("first")
            let last = await iterator.next()
            #expect(last?.index == 0)
            #expect(try last?.result.get().body == Data("open first".utf8))
            #expect(await iterator.next() == nil)
            #expect(await iterator.next() == nil)
        }
    }

    @Test func failuresAndOperationsStartedBeforeAreOutcomesToo() async throws {
        try await withServer { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 2)
            var refused = Request(url: server.url("/bytes/1"))
            refused.allowedSchemes = ["ftp"]
            let started = RequestOperation(request: Request(url: server.url("/bytes/5?started")))
            let startedOutcome = LockedBox<Result<Response, RequestError>?>(nil)
            let startedDone = AsyncStream<Void>.makeStream()
            started.completionHandler = { result in
                startedOutcome.update { $0 = result }
                startedDone.continuation.finish()
            }
            try started.start()
            let operations = [
                RequestOperation(request: Request(url: server.url("/status/404"))),
                RequestOperation(request: refused),
                started,
                RequestOperation(request: Request(url: server.url("/bytes/2"))),
            ]
            let outcomes = await collect(queue.responses(for: operations)).sorted { $0.index < $1.index }
            #expect(outcomes.map(\.index) == [0, 1, 2, 3])
            #expect(try outcomes[0].result.get().status == .notFound)
            guard case .failure(.invalidRequest) = outcomes[1].result else {
                Issue.record("a scheme that is not allowed: \(outcomes[1].result)")
                return
            }
            guard case .failure(.invalidRequest(let reason)) = outcomes[2].result else {
                Issue.record("an operation started before: \(outcomes[2].result)")
                return
            }
            #expect(reason.contains("index 2"))
            #expect(try outcomes[3].result.get().body.count == 2)
            // The operation started before ran on its own, untouched by the batch.
            for await _ in startedDone.stream {}
            #expect(try startedOutcome.value?.get().body.count == 5)
        }
    }

    @Test func cancellingTheIteratingTaskCancelsTheRestAndTheLoopStillEnds() async throws {
        try await withServer { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 2)
            let operations = (0..<6).map { RequestOperation(request: Request(url: server.url("/gate/never?i=\($0)"))) }
            let responses = queue.responses(for: operations)
            let consumer = Task { await collect(responses) }
            try await server.waitForRequests(pathPrefix: "/gate/never", count: 2)
            consumer.cancel()
            let outcomes = await consumer.value
            #expect(outcomes.count == 6)
            #expect(outcomes.allSatisfy { isCancelled($0.result) })
            #expect(operations.allSatisfy { $0.isCancelled })
            #expect(queue.requestCount == 0)
            // The four pending ones never reached the server: no freed slot started them.
            #expect(server.requests.filter { $0.path == "/gate/never" }.count == 2)
        }
    }

    @Test func aCancelledTaskCancelsTheRestEvenWhenAnOutcomeIsReady() async throws {
        try await withServer { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 0)
            let operations = [RequestOperation(request: Request(url: server.url("/bytes/1")))]
                + (0..<2).map { RequestOperation(request: Request(url: server.url("/gate/never?i=\($0)"))) }
            let responses = queue.responses(for: operations)
            // The batch's hook runs before the operation's awaiting tasks are resumed: its
            // outcome is ready to take.
            _ = try await operations[0].response()
            let consumer = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                var iterator = responses.makeAsyncIterator()
                let first = await iterator.next()
                // A consumer slower than the transfers always finds an outcome ready: its
                // cancellation must not wait for it to catch up.
                let othersCancelled = operations.dropFirst().allSatisfy(\.isCancelled)
                var count = first == nil ? 0 : 1
                while await iterator.next() != nil { count += 1 }
                return (first?.index, othersCancelled, count)
            }
            let (first, othersCancelled, count) = await consumer.value
            #expect(first == 0)
            #expect(othersCancelled)
            #expect(count == 3)
        }
    }

    @Test func leavingTheLoopEarlyCancelsTheRest() async throws {
        try await withServer { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 2)
            let operations = [RequestOperation(request: Request(url: server.url("/bytes/1")))]
                + (0..<3).map { RequestOperation(request: Request(url: server.url("/gate/never?i=\($0)"))) }
            for await outcome in queue.responses(for: operations) {
                #expect(outcome.index == 0)
                break
            }
            await queue.waitUntilAllOperationsAreFinished()
            #expect(operations.dropFirst().allSatisfy { $0.isCancelled })
        }
    }

    @Test func droppingTheSequenceUnreadCancelsItsOperations() async throws {
        try await withServer { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 1)
            let operations = (0..<3).map { RequestOperation(request: Request(url: server.url("/gate/never?i=\($0)"))) }
            do {
                let responses = queue.responses(for: operations)
                try await server.waitForRequests(pathPrefix: "/gate/never", count: 1)
                #expect(responses.count == 3)
            }
            await queue.waitUntilAllOperationsAreFinished()
            #expect(operations.allSatisfy { $0.isCancelled })
        }
    }

    @Test func aCancelledTaskEndsTheLoopOfASuspendedQueue() async throws {
        try await withServer { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 2)
            queue.isSuspended = true
            let responses = queue.responses(for: (0..<5).map { Request(url: server.url("/bytes/\($0)")) })
            let consumer = Task { await collect(responses) }
            consumer.cancel()
            let outcomes = await consumer.value
            #expect(outcomes.map(\.index).sorted() == Array(0..<5))
            #expect(outcomes.allSatisfy { isCancelled($0.result) })
            #expect(queue.requestCount == 0)
            #expect(server.requests.isEmpty)
        }
    }

    @Test func anOperationTwiceInTheBatchRunsOnceAndItsSecondPlaceIsRefused() async throws {
        try await withServer { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 2)
            let operation = RequestOperation(request: Request(url: server.url("/bytes/3")))
            let outcomes = await collect(queue.responses(for: [operation, operation])).sorted { $0.index < $1.index }
            #expect(outcomes.map(\.index) == [0, 1])
            let response = try outcomes[0].result.get()
            #expect(response.body.count == 3)
            guard case .failure(.invalidRequest(let reason)) = outcomes[1].result else {
                Issue.record("the operation's second place: \(outcomes[1].result)")
                return
            }
            #expect(reason.contains("index 1"))
            #expect(server.requests.count == 1)
        }
    }

    /// The batch lets go of an operation once its outcome is decided: an operation nobody else
    /// holds (one whose handler holds it, even) is freed while the sequence lives on.
    @Test func anOperationIsLetGoOfOnceItsOutcomeIsTaken() async throws {
        try await withServer { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 2)
            weak var released: RequestOperation?
            let responses: RequestQueue.Responses
            do {
                let operation = RequestOperation(request: Request(url: server.url("/bytes/10")))
                operation.completionHandler = { _ in _ = operation }
                released = operation
                responses = queue.responses(for: [operation])
            }
            // The outcome reaches the task after the engine's turn, once the operation's
            // delivery has returned.
            #expect(await collect(responses).count == 1)
            await drain()
            #expect(released == nil, "the batch keeps its decided operation")
            #expect(responses.count == 1)
        }
    }

    @Test func anEmptyBatchEndsAtOnce() async {
        let responses = RequestQueue().responses(for: [Request]())
        #expect(responses.count == 0)
        #expect(await collect(responses).isEmpty)
    }

    @Test func anEqualRequestLaterInTheBatchCancelsTheEarlierOneAsAddDoes() async throws {
        try await withServer { server in
            let queue = RequestQueue(maxConcurrentRequestCount: 1)
            queue.isSuspended = true
            let request = Request(url: server.url("/bytes/4"))
            let responses = queue.responses(for: [request, request])
            queue.isSuspended = false
            let outcomes = await collect(responses).sorted { $0.index < $1.index }
            #expect(isCancelled(outcomes[0].result))
            let kept = try outcomes[1].result.get()
            #expect(kept.body.count == 4)
        }
    }
}
