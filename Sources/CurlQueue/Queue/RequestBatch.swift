/// The operations of one `RequestQueue.responses(for:)` call and the
/// hand-over of their outcomes to the task that iterates them.
///
/// Each operation's outcome reaches the batch through an internal finish hook, on the thread
/// that decided it: most often the engine thread, where the batch only stores it, and wakes a
/// waiting consumer after the engine's turn, when the turn's next transfers are on the wire.
/// The outcomes of one turn thus cost one wakeup of the consumer, not one each, and no
/// callback queue is involved.
final class RequestBatch: Sendable {
    typealias Waiter = CheckedContinuation<RequestQueue.Responses.Outcome?, Never>

    private struct State: Sendable {
        var machine: StateMachine<Waiter, RequestQueue.Responses.Outcome>
        /// The batch's operations whose outcome is not decided yet, by index, for cancelling
        /// them. A decided one is let go of at once: it holds its response.
        var operations: [RequestOperation?]
    }

    private let state: Locked<State>
    let count: Int
    private let engine: CurlEngine

    /// A batch of `count` outcomes.
    init(count: Int, engine: CurlEngine) {
        self.count = count
        self.engine = engine
        state = Locked(State(machine: StateMachine(count: count), operations: Array(repeating: nil, count: count)))
    }

    /// Adds the operation at `index` to those ``cancel()`` cancels; before its outcome can be
    /// decided.
    func track(_ operation: RequestOperation, at index: Int) {
        state.withLock { $0.operations[index] = operation }
    }

    /// The next outcome, in the order the operations finished, if one is there to take.
    /// Most calls find one (a consumer's wakeup brings a turn's worth): they need no
    /// continuation and no suspension.
    func take() -> StateMachine<Waiter, RequestQueue.Responses.Outcome>.Take {
        state.withLock { $0.machine.take() }
    }

    /// Waits for the next outcome, or the end, on `waiter`; resumes it at once when one came
    /// after ``take()`` found none.
    func wait(_ waiter: Waiter) {
        switch state.withLock({ $0.machine.wait(waiter) }) {
        case .outcome(let outcome): waiter.resume(returning: outcome)
        case .end: waiter.resume(returning: nil)
        case .wait: break
        }
    }

    /// Called once per operation, when its outcome is decided.
    func decided(_ outcome: RequestQueue.Responses.Outcome) {
        let (action, released) = state.withLock { state in
            let released = state.operations[outcome.index]
            state.operations[outcome.index] = nil
            return (state.machine.decided(outcome), released)
        }
        _ = released  // let go of after the lock
        guard case .hand(let outcome, let waiter, let ending) = action else { return }
        let resume: @Sendable () -> Void = {
            waiter.resume(returning: outcome)
            for other in ending { other.resume(returning: nil) }
        }
        if engine.isOnEngineThread {
            engine.resumeAfterThisTurn(resume)
        } else {
            resume()
        }
    }

    /// Cancels the operations whose outcome is not decided yet; their outcomes, `cancelled`,
    /// still come. Only the first call does anything.
    func cancel() {
        let operations = state.withLock { state -> [RequestOperation] in
            guard state.machine.cancel() else { return [] }
            return state.operations.compactMap { $0 }
        }
        // Pending ones first: a running one's freed slot must not start another of the batch.
        for operation in operations where operation.isBeforeFirstAttempt { operation.cancel() }
        for operation in operations { operation.cancel() }
    }
}

extension RequestBatch: Cancellable {}
