extension RequestQueue {
    /// The outcomes of a batch of operations, in the order they finish, for one task to
    /// iterate: see `RequestQueue.responses(for:)`.
    ///
    /// Contracts:
    /// - Every operation of the batch yields exactly one ``Outcome`` (a response for any HTTP
    ///   status, or the error, ``RequestError/cancelled`` included), in the order the outcomes
    ///   were decided; the iteration ends after the last one.
    /// - Outcomes not yet taken are kept (with their bodies) until they are: write big bodies
    ///   to files with `Request.destination`.
    /// - Cancelling the iterating task, leaving the loop early, or dropping the sequence and
    ///   every iterator of it cancels the operations still pending or running. After a task's
    ///   cancellation the loop goes on to the end, and the outcomes of those operations are
    ///   ``RequestError/cancelled`` (or whatever they had reached first).
    /// - Iterate it once. A second iterator takes the outcomes the first has not taken, and
    ///   cancelling either task or leaving either loop cancels the batch for both.
    public struct Responses: AsyncSequence, Sendable {
        /// One operation's outcome.
        public struct Outcome: Sendable {
            /// The request's position in the sequence given to
            /// `RequestQueue.responses(for:)`, from 0.
            public let index: Int
            /// The request.
            public let request: Request
            /// The response (any HTTP status) or the error.
            public let result: Result<Response, RequestError>
        }

        /// One operation's outcome.
        public typealias Element = Outcome
        /// Never: a failed operation is an outcome like any other.
        public typealias Failure = Never

        let batch: RequestBatch
        /// Cancels the batch when the sequence, its copies and its iterators are all gone.
        private let owner: CancelOnDrop

        init(batch: RequestBatch) {
            self.batch = batch
            self.owner = CancelOnDrop(batch)
        }

        /// How many operations the batch has: the number of outcomes it yields.
        public var count: Int { batch.count }

        /// Makes the iterator. The sequence going away while the iterator lives cancels
        /// nothing (`for await outcome in queue.responses(for: requests)` drops the sequence as
        /// soon as the loop has its iterator).
        public func makeAsyncIterator() -> AsyncIterator {
            AsyncIterator(batch: batch, sequenceOwner: owner)
        }

        /// Iterates the outcomes of a ``RequestQueue/Responses``.
        public struct AsyncIterator: AsyncIteratorProtocol {
            /// One operation's outcome.
            public typealias Element = Outcome
            /// Never: a failed operation is an outcome like any other.
            public typealias Failure = Never

            let batch: RequestBatch
            private let owner: CancelOnDrop
            /// The sequence's own: kept so that dropping the sequence cancels nothing while an
            /// iterator made from it is in use.
            private let sequenceOwner: CancelOnDrop

            fileprivate init(batch: RequestBatch, sequenceOwner: CancelOnDrop) {
                self.batch = batch
                self.owner = CancelOnDrop(batch)
                self.sequenceOwner = sequenceOwner
            }

            /// The next outcome to be decided; nil after the last. Cancelling the calling task
            /// cancels the operations still pending or running.
            public mutating func next(isolation actor: isolated (any Actor)? = #isolation) async -> Outcome? {
                // A task slower than the transfers always finds an outcome ready, and so never
                // reaches the cancellation handler below: its cancellation is seen here.
                if Task.isCancelled { batch.cancel() }
                // Taken where the caller runs: no hop to another executor and back for an
                // outcome that is already there.
                switch batch.take() {
                case .outcome(let outcome): return outcome
                case .end: return nil
                case .wait: break
                }
                let batch = self.batch
                return await withTaskCancellationHandler(
                    operation: { await withCheckedContinuation(isolation: actor) { batch.wait($0) } },
                    onCancel: { batch.cancel() },
                    isolation: actor)
            }

            /// The next outcome to be decided; nil after the last.
            public mutating func next() async -> Outcome? {
                await next(isolation: nil)
            }
        }
    }

    /// Adds an operation for each request, in order, and returns their outcomes as they
    /// finish: one task waits for a whole batch.
    ///
    /// ```swift
    /// for await outcome in queue.responses(for: urls.map { Request(url: $0) }) {
    ///     print(outcome.index, (try? outcome.result.get())?.status ?? "failed")
    /// }
    /// ```
    ///
    /// The operations are added when this is called, as ``add(_:completionHandler:)`` would
    /// add them, with the queue's limits, order and duplicate rule (a request equal to an
    /// earlier one of the batch cancels it unless ``allowDuplicateRequests``). It costs less
    /// than a task per request awaiting ``response(for:)``: the outcomes that the engine
    /// decides in one turn reach the iterating task with one wakeup, and no callback queue is
    /// involved. See ``Responses`` for the contracts.
    public func responses(for requests: some Sequence<Request>) -> Responses {
        responses(for: requests.map(RequestOperation.init(request:)))
    }

    /// Adds each operation, in order, and returns their outcomes as they finish: as
    /// `responses(for:)` with requests, for operations set up beforehand (auto-retry,
    /// priority, progress handlers). Their own handlers run as usual.
    ///
    /// An operation that was started or added to a queue before is not added again: its
    /// outcome in the batch is at once ``RequestError/invalidRequest(_:)``, and its own run is
    /// not touched.
    public func responses(for operations: some Sequence<RequestOperation>) -> Responses {
        let operations = Array(operations)
        let batch = RequestBatch(count: operations.count, engine: .shared)
        for (index, operation) in operations.enumerated() {
            do {
                try add(operation)
            } catch {
                let reason = "the operation at index \(index) was started or queued before"
                batch.decided(Responses.Outcome(index: index, request: operation.request, result: .failure(.invalidRequest(reason))))
                continue
            }
            batch.track(operation, at: index)
            // After the queue's own hook, which frees the slot and starts the next operation.
            operation.onFinish { [batch] operation in
                let result = operation.state.withLock { $0.machine.result } ?? .failure(.cancelled)
                batch.decided(Responses.Outcome(index: index, request: operation.request, result: result))
            }
        }
        return Responses(batch: batch)
    }
}
