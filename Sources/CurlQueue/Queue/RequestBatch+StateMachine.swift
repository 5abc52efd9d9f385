import DequeModule

extension RequestBatch {
    /// What lies between a batch's operations and the tasks iterating its outcomes, as a value
    /// with no I/O and no lock in it: the outcomes decided and not yet taken, the consumers
    /// waiting for one, and how many outcomes are still to come.
    ///
    /// `RequestBatch` owns one, changes it under its lock, and performs the returned action
    /// after releasing the lock. Every outcome is handed out exactly once, in the order the
    /// operations finished; a consumer that waits is resumed exactly once, with an outcome or
    /// with the end.
    ///
    /// Generic over the waiting consumer (a continuation) and the outcome, so that tests can
    /// drive it with plain values.
    struct StateMachine<Waiter, Outcome>: Sendable where Waiter: Sendable, Outcome: Sendable {
        /// Decided, not yet taken. Only ever non-empty while nobody waits.
        private var ready = Deque<Outcome>()
        /// Consumers waiting for an outcome. Only ever non-empty while `ready` is empty.
        private var waiters = Deque<Waiter>()
        /// Outcomes not yet decided.
        private(set) var pending: Int
        /// Set by the first ``cancel()`` that found outcomes still to come.
        private(set) var isCancelled = false

        init(count: Int) {
            pending = max(0, count)
        }

        /// True once every outcome was decided (some may still wait to be taken).
        var allDecided: Bool { pending == 0 }

        /// The outcomes decided and not yet taken.
        var readyCount: Int { ready.count }

        enum Take {
            /// The next outcome.
            case outcome(Outcome)
            /// Every outcome was taken: the iteration ends.
            case end
            /// Nothing to take yet: the consumer must wait.
            case wait
        }

        /// A consumer takes the next outcome without waiting.
        mutating func take() -> Take {
            if let outcome = ready.popFirst() { return .outcome(outcome) }
            return pending == 0 ? .end : .wait
        }

        /// A consumer that found nothing to take waits; something may have come in between,
        /// and then it does not.
        mutating func wait(_ waiter: Waiter) -> Take {
            let take = take()
            if case .wait = take { waiters.append(waiter) }
            return take
        }

        /// The batch is cancelled: true for the first call while outcomes are still to come
        /// (the owner then cancels the operations not yet decided); false for any later call,
        /// or once every outcome was decided, when there is nothing left to cancel.
        mutating func cancel() -> Bool {
            guard !isCancelled, pending > 0 else { return false }
            isCancelled = true
            return true
        }

        enum Action {
            case none
            /// Resume `waiter` with `outcome`, then resume each of `ending` with the end.
            case hand(Outcome, to: Waiter, ending: [Waiter])
        }

        /// An operation's outcome was decided. Called once per operation, at most `count`
        /// times in all; a call beyond that is ignored.
        mutating func decided(_ outcome: Outcome) -> Action {
            guard pending > 0 else { return .none }
            pending -= 1
            guard let waiter = waiters.popFirst() else {
                ready.append(outcome)
                return .none
            }
            // Waiters wait only while nothing is ready: the others end if this was the last.
            var ending: [Waiter] = []
            if pending == 0 {
                ending = Array(waiters)
                waiters.removeAll()
            }
            return .hand(outcome, to: waiter, ending: ending)
        }
    }
}
