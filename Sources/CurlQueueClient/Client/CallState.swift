import CurlQueue

/// What a running call and its handle share: the task that runs it and whether it was
/// cancelled or finished.
final class CallState: Sendable {
    private struct State {
        var task: Task<Void, Never>?
        var cancelled = false
        var finished = false
    }

    private let state = Locked(State())
    private static let ids = Locked(0)


    /// A new process-unique call identity.
    static func nextID() -> RequestHandle.ID {
        RequestHandle.ID(value: ids.withLock { $0 += 1; return $0 })
    }

    var isFinished: Bool { state.withLock { $0.finished } }

    /// Records the call's task; cancels it at once when the call was cancelled before.
    func attach(_ task: Task<Void, Never>) {
        let cancelNow = state.withLock { state -> Bool in
            guard !state.finished else { return false }
            state.task = task
            return state.cancelled
        }
        if cancelNow { task.cancel() }
    }

    func cancel() {
        let task = state.withLock { state -> Task<Void, Never>? in
            guard !state.finished, !state.cancelled else { return nil }
            state.cancelled = true
            return state.task
        }
        task?.cancel()
    }

    /// Decides the outcome, once: `result`, or a cancellation when `cancel()` came first and
    /// `replacingOnCancel` (a batch keeps the results its calls had when it was cancelled).
    func finish<Output>(_ result: Result<Output, HTTPClientError>, replacingOnCancel: Bool) -> Result<Output, HTTPClientError> {
        state.withLock { state in
            state.finished = true
            state.task = nil
            return state.cancelled && replacingOnCancel ? .failure(.transport(.cancelled)) : result
        }
    }
}
