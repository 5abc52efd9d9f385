import CurlQueue
import Dispatch

extension HTTPClient {
    /// Identical GETs and HEADs of one client in flight at once, sharing one transfer.
    ///
    /// A call's request (after the middleware stack and the cache) is shared when it is a GET
    /// or HEAD with no body, no download file and no resume, and an equal request with equal
    /// retry settings is in flight for another call of the same client: equal as ``Request``'s
    /// `==` says — URL, every header field (credentials included), time limits, TLS settings,
    /// redirects and limits. The first call makes the operation and adds it to the queue; the
    /// others wait for its outcome, and every one of them gets it. A transfer is shared only
    /// while it is in flight: once its outcome is decided, the next equal call makes a new one.
    ///
    /// A caller that is cancelled gets `.cancelled` at once and leaves the transfer running
    /// for the others; when the last one leaves, the transfer is cancelled, and an equal call
    /// after that makes a new one rather than joining it.
    ///
    /// All state is under one lock, which is never held while a continuation is resumed or
    /// an operation is cancelled or added.
    final class Coalescer: Sendable {
        struct Key: Hashable {
            let request: Request
            let retry: RetrySettings
        }

        private struct Flight {
            /// Tells this flight from a later one under the same key.
            let id: Int
            let operation: RequestOperation
            /// Resumed with the flight's operation once its outcome is decided, or nil for a
            /// caller that was cancelled.
            var waiters: [Int: Waiter] = [:]
        }

        typealias Waiter = CheckedContinuation<RequestOperation?, Never>

        private struct State {
            var flights: [Key: Flight] = [:]
            var nextID = 0
            /// Callers of ``waitUntilSharing(_:timeout:)``.
            var sharingWaiters: [(id: Int, callers: Int, continuation: CheckedContinuation<Bool, Never>)] = []
        }

        private let state = Locked(State())

        /// Whether a transfer of `request` may be shared between calls.
        static func isShareable(_ request: Request) -> Bool {
            (request.method == .get || request.method == .head) && request.body == nil && request.destination == nil
                && !request.resume
        }

        /// A new caller identity.
        func nextCallerID() -> Int {
            state.withLock { state in
                state.nextID += 1
                return state.nextID
            }
        }

        /// The response to `key.request`: from the transfer in flight for an equal request, or
        /// from a new operation made by `makeOperation` and added to the queue with `add` (out of
        /// the lock; `add` must accept an operation cancelled meanwhile, whose callers were all
        /// cancelled). Cancelling the calling task leaves the transfer to the other callers.
        func response(
            for key: Key, makeOperation: () -> RequestOperation, add: (RequestOperation) -> Void
        ) async -> Result<Response, RequestError> {
            let caller = nextCallerID()
            let finished = await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    if let operation = join(key, caller: caller, continuation: continuation, makeOperation: makeOperation) {
                        add(operation)
                    }
                }
            } onCancel: {
                leave(key, caller: caller)
            }
            // The outcome is read under the operation's lock, not carried by the continuation,
            // for ThreadSanitizer to see its hand-over from the engine thread: see
            // `RequestOperation.response()`.
            guard let finished else { return .failure(.cancelled) }
            guard let outcome = finished.result else { preconditionFailure("a flight finished before its outcome was decided") }
            return outcome
        }

        /// Files `continuation` under the flight for `key`, making the flight when there is none;
        /// returns the new flight's operation, for the caller to add to the queue.
        private func join(
            _ key: Key, caller: Int, continuation: Waiter,
            makeOperation: () -> RequestOperation
        ) -> RequestOperation? {
            let (newFlight, ready, cancelled) = state.withLock {
                state -> ((RequestOperation, id: Int)?, [CheckedContinuation<Bool, Never>], Bool) in
                // The task's flag is set before its cancellation handler runs, and both take
                // this lock: a caller cancelled before it got here is not filed, and one
                // cancelled after is found by `leave`.
                if Task.isCancelled { return (nil, [], true) }
                var newFlight: (RequestOperation, id: Int)?
                if state.flights[key] == nil {
                    let operation = makeOperation()
                    state.nextID += 1
                    state.flights[key] = Flight(id: state.nextID, operation: operation)
                    newFlight = (operation, state.nextID)
                }
                state.flights[key]!.waiters[caller] = continuation
                let sharing = state.flights[key]!.waiters.count
                let ready = state.sharingWaiters.filter { $0.callers <= sharing }.map(\.continuation)
                state.sharingWaiters.removeAll { $0.callers <= sharing }
                return (newFlight, ready, false)
            }
            for waiter in ready { waiter.resume(returning: true) }
            if cancelled {
                continuation.resume(returning: nil)
                return nil
            }
            guard let (operation, id) = newFlight else { return nil }
            operation.onFinish { [self] operation in finish(key, id: id, operation: operation) }
            return operation
        }

        /// Takes the caller out of its flight and resumes it with `.cancelled`; cancels the
        /// flight's transfer when it was the last one.
        private func leave(_ key: Key, caller: Int) {
            let (continuation, abandoned) = state.withLock {
                state -> (Waiter?, RequestOperation?) in
                guard var flight = state.flights[key], let continuation = flight.waiters.removeValue(forKey: caller) else {
                    return (nil, nil)  // not filed yet (`join` sees the flag), or resumed already
                }
                if flight.waiters.isEmpty {
                    state.flights[key] = nil
                    return (continuation, flight.operation)
                }
                state.flights[key] = flight
                return (continuation, nil)
            }
            continuation?.resume(returning: nil)
            abandoned?.cancel()
        }

        /// The flight's outcome is decided: every caller still in it gets it.
        private func finish(_ key: Key, id: Int, operation: RequestOperation) {
            let waiters = state.withLock { state -> [Waiter] in
                guard let flight = state.flights[key], flight.id == id else { return [] }  // abandoned
                state.flights[key] = nil
                return Array(flight.waiters.values)
            }
            for waiter in waiters { waiter.resume(returning: operation) }
        }

        /// Returns true once some flight is shared by at least `callers` callers, or false when
        /// none is within `timeout` (for tests, which must fail rather than hang).
        func waitUntilSharing(_ callers: Int, timeout: Duration = .seconds(30)) async -> Bool {
            await withCheckedContinuation { continuation in
                let id = state.withLock { state -> Int? in
                    if state.flights.values.contains(where: { $0.waiters.count >= callers }) { return nil }
                    state.nextID += 1
                    state.sharingWaiters.append((id: state.nextID, callers: callers, continuation: continuation))
                    return state.nextID
                }
                guard let id else { return continuation.resume(returning: true) }
                let (seconds, attoseconds) = timeout.components
                let delay = Double(seconds) + Double(attoseconds) / 1e18
                DispatchQueue.global().asyncAfter(deadline: .now() + delay) { [self] in
                    let late = state.withLock { state in
                        let index = state.sharingWaiters.firstIndex { $0.id == id }
                        return index.map { state.sharingWaiters.remove(at: $0).continuation }
                    }
                    late?.resume(returning: false)
                }
            }
        }
    }
}
