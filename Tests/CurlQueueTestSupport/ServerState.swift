import NIOCore
import NIOConcurrencyHelpers

/// Everything a ``FixtureServer`` shares between its public API (any thread) and its connection
/// handlers (event-loop threads): the request log and counters, waiters, gates, flaky-route hit
/// counts and the set of open connections.
///
/// All of it lives in one `NIOLockedValueBox` (a pthread mutex, which ThreadSanitizer understands); no lock is held while a continuation is resumed, a callback is
/// invoked or a channel is touched. The feature-specific operations are in extensions next to the
/// code that uses them (`FixtureServer+Recording.swift`, `FixtureServer+Gates.swift`).
final class ServerState: Sendable {
    struct State {
        // Recording (see FixtureServer+Recording.swift).
        var requests: [RecordedRequest] = []
        /// `sequence` of `requests[0]` (sequences are never reused, `requests` is cleared by a reset).
        var firstSequenceInLog = 0
        var nextSequence = 0
        var inFlight = 0
        var peakConcurrency = 0
        var connectionsAccepted = 0
        var flakyHits: [String: Int] = [:]
        /// When `/trickle-head` wrote each of its units, in order (``FixtureServer/trickleWrites``).
        var trickleWrites: [ContinuousClock.Instant] = []
        var requestWaiters: [Int: RequestWaiter] = [:]
        /// Waiters cancelled before they were registered (see `registerRequestWaiter`).
        var cancelledRequestWaiters: Set<Int> = []
        var nextRequestWaiterID = 0

        // Gates (see FixtureServer+Gates.swift).
        var openGates: Set<String> = []
        var gateWaiters: [String: [Int: @Sendable () -> Void]] = [:]
        var nextGateWaiterID = 0

        // Connections.
        var nextConnectionID = 1
        var openChannels: [Int: any Channel] = [:]
        /// IDs of the connections closed so far, and who waits for one to close.
        var closedConnections: Set<Int> = []
        var closeWaiters: [Int: [CheckedContinuation<Void, Never>]] = [:]
        var isShutDown = false
    }

    /// A pending ``FixtureServer/waitForRequests(pathPrefix:count:timeout:)`` call.
    struct RequestWaiter {
        var pathPrefix: String
        var needed: Int
        var seen: Int
        var continuation: CheckedContinuation<Void, any Error>
        var timeout: Scheduled<Void>?
    }

    let mutex = NIOLockedValueBox(State())

    var isShutDown: Bool {
        mutex.withLockedValue { $0.isShutDown }
    }

    // MARK: Connections

    /// Registers a newly accepted connection and returns its ID, or `nil` once shutdown has begun
    /// (the caller then refuses the connection).
    func connectionAccepted(_ channel: any Channel) -> Int? {
        mutex.withLockedValue { state in
            guard !state.isShutDown else { return nil }
            let id = state.nextConnectionID
            state.nextConnectionID += 1
            state.connectionsAccepted += 1
            state.openChannels[id] = channel
            return id
        }
    }

    /// Every open connection but `id` (for `/close-connections`).
    func openConnections(except id: Int) -> [any Channel] {
        mutex.withLockedValue { state in
            state.openChannels.filter { $0.key != id }.map(\.value)
        }
    }

    func connectionClosed(_ id: Int) {
        let waiters = mutex.withLockedValue { state in
            state.openChannels.removeValue(forKey: id)
            state.closedConnections.insert(id)
            return state.closeWaiters.removeValue(forKey: id) ?? []
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Resumes `continuation` once connection `id` has closed: at once if it has.
    func whenConnectionClosed(_ id: Int, _ continuation: CheckedContinuation<Void, Never>) {
        let closed = mutex.withLockedValue { state in
            if state.closedConnections.contains(id) { return true }
            state.closeWaiters[id, default: []].append(continuation)
            return false
        }
        if closed { continuation.resume() }
    }

    /// Marks the server as shut down and hands back what the caller must now close or fail: every
    /// open connection and every pending request waiter. Later calls return nothing.
    func beginShutdown() -> (channels: [any Channel], waiters: [RequestWaiter]) {
        mutex.withLockedValue { state in
            guard !state.isShutDown else { return ([], []) }
            state.isShutDown = true
            let channels = Array(state.openChannels.values)
            let waiters = Array(state.requestWaiters.values)
            state.openChannels = [:]
            state.requestWaiters = [:]
            state.gateWaiters = [:]
            return (channels, waiters)
        }
    }
}
