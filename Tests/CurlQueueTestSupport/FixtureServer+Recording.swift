import NIOCore

/// One request as the fixture server saw it.
///
/// A request is recorded as soon as its head arrives, so it is visible (and counts for
/// ``FixtureServer/waitForRequests(pathPrefix:count:timeout:)``) while its body is still being
/// uploaded and before it is answered.
public struct RecordedRequest: Sendable, Hashable {
    /// One header line, exactly as received (name case preserved).
    public struct Header: Sendable, Hashable {
        /// The header name as sent by the client.
        public var name: String
        /// The header value.
        public var value: String

        /// Creates a header line.
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// The request method, e.g. `"GET"`.
    public var method: String
    /// The request target as sent: path and query, e.g. `"/bytes/10?chunked=1"`.
    public var uri: String
    /// The path part of ``uri`` (everything before `?`), not percent-decoded.
    public var path: String
    /// All header lines in the order received.
    public var headers: [Header]
    /// Request body bytes received so far; final once the whole request has arrived.
    public var bodyLength: Int
    /// Server-wide arrival number, starting at 0. Never reused: ``FixtureServer/resetStatistics()``
    /// empties the log but does not restart the numbering.
    public var sequence: Int
    /// The connection the request arrived on. Connection IDs start at 1, are unique for the
    /// server's lifetime and are not reset by ``FixtureServer/resetStatistics()``, so two requests
    /// with the same `connectionID` travelled over the same (reused) TCP connection.
    public var connectionID: Int
    /// When the request head arrived (``ContinuousClock``), for tests of timing at the server.
    public var arrival: ContinuousClock.Instant

    /// Creates a recorded request (the server creates these; public for tests of test helpers).
    public init(
        method: String,
        uri: String,
        path: String,
        headers: [Header],
        bodyLength: Int,
        sequence: Int,
        connectionID: Int,
        arrival: ContinuousClock.Instant = .now
    ) {
        self.method = method
        self.uri = uri
        self.path = path
        self.headers = headers
        self.bodyLength = bodyLength
        self.sequence = sequence
        self.connectionID = connectionID
        self.arrival = arrival
    }

    /// The value of the first header called `name` (compared case-insensitively), or `nil`.
    public func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.name.lowercased() == wanted }?.value
    }

    /// The values of all headers called `name` (compared case-insensitively), in order.
    public func headerValues(_ name: String) -> [String] {
        let wanted = name.lowercased()
        return headers.filter { $0.name.lowercased() == wanted }.map(\.value)
    }
}

/// Errors thrown by ``FixtureServer``.
public enum FixtureServerError: Error, Sendable, Hashable, CustomStringConvertible {
    /// ``FixtureServer/waitForRequests(pathPrefix:count:timeout:)`` gave up: only `received` of the
    /// `expected` requests to `pathPrefix` arrived in time.
    case timedOut(pathPrefix: String, expected: Int, received: Int)
    /// The server was shut down while (or before) waiting.
    case shutDown

    /// A readable explanation, used when a test fails with this error.
    public var description: String {
        switch self {
        case .timedOut(let pathPrefix, let expected, let received):
            return "timed out waiting for \(expected) request(s) to \(pathPrefix)* (\(received) arrived)"
        case .shutDown:
            return "the fixture server was shut down"
        }
    }
}

extension FixtureServer {
    /// Every request received since start (or the last ``resetStatistics()``), in the order their
    /// heads arrived.
    public var requests: [RecordedRequest] {
        state.mutex.withLockedValue { $0.requests }
    }

    /// When `/trickle-head` handed each of its units (bytes or lines) to the socket, in order:
    /// a client cannot have seen one before then, so a test times a stall from the last one
    /// written instead of from when it was due (a loaded test process runs the timers late).
    public var trickleWrites: [ContinuousClock.Instant] {
        state.mutex.withLockedValue { $0.trickleWrites }
    }

    /// The largest number of requests that were in flight at the same time since start (or the
    /// last ``resetStatistics()``).
    ///
    /// A request is in flight from the arrival of its head until its response has been completely
    /// written, or until its connection closes, whichever comes first.
    public var peakConcurrency: Int {
        state.mutex.withLockedValue { $0.peakConcurrency }
    }

    /// The number of requests in flight right now (see ``peakConcurrency``).
    public var inFlight: Int {
        state.mutex.withLockedValue { $0.inFlight }
    }

    /// Returns once the connection with this ``RecordedRequest/connectionID`` has closed, from
    /// either side (at once if it has). The server resumes the caller when it sees the close;
    /// there is no polling. Every connection closes when the server shuts down.
    public func waitUntilConnectionClosed(_ connectionID: Int) async {
        let state = self.state
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            state.whenConnectionClosed(connectionID, continuation)
        }
    }

    /// The number of TCP connections accepted since start (or the last ``resetStatistics()``).
    public var connectionsAccepted: Int {
        state.mutex.withLockedValue { $0.connectionsAccepted }
    }

    /// How many requests `/flaky/ID` has received for `id` (failed and successful ones).
    /// Not cleared by ``resetStatistics()``.
    public func hits(_ id: String) -> Int {
        state.mutex.withLockedValue { $0.flakyHits[id] ?? 0 }
    }

    /// Empties ``requests`` and resets ``connectionsAccepted`` to 0 and ``peakConcurrency`` to the
    /// current ``inFlight``.
    ///
    /// Flaky hit counts, opened gates, sequence numbers and connection IDs are left alone. Pending
    /// ``waitForRequests(pathPrefix:count:timeout:)`` calls start counting from zero again.
    public func resetStatistics() {
        state.mutex.withLockedValue { state in
            state.requests = []
            state.firstSequenceInLog = state.nextSequence
            state.peakConcurrency = state.inFlight
            state.connectionsAccepted = 0
            for id in state.requestWaiters.keys {
                state.requestWaiters[id]!.seen = 0
            }
        }
    }

    /// Suspends until at least `count` requests whose path starts with `pathPrefix` are in
    /// ``requests`` (requests that arrived earlier count too).
    ///
    /// The server resumes the caller when the request head that completes the count arrives; there
    /// is no polling.
    ///
    /// The default `timeout` is a guard against a request that never comes, not a bound on how
    /// soon it comes: in the parallel suite a request goes out only once Swift's concurrency
    /// pool (a thread per core) runs its task, behind every other test's work; on a loaded
    /// 2-core machine that took more than 10 s at the start of a run.
    ///
    /// - Throws: ``FixtureServerError/timedOut(pathPrefix:expected:received:)`` after `timeout`,
    ///   ``FixtureServerError/shutDown`` if the server is or gets shut down, `CancellationError`
    ///   if the calling task is cancelled.
    public func waitForRequests(
        pathPrefix: String,
        count: Int,
        timeout: Duration = .seconds(60)
    ) async throws {
        let state = self.state
        let eventLoop = self.listener.channel.eventLoop
        let id = state.makeRequestWaiterID()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                guard state.registerRequestWaiter(id: id, pathPrefix: pathPrefix, count: count, continuation) else {
                    return  // already resumed
                }
                let timeoutTask = eventLoop.scheduleTask(in: TimeAmount(timeout)) {
                    state.failRequestWaiter(id: id, reason: .timeout)
                }
                state.attachTimeout(timeoutTask, toRequestWaiter: id)
            }
        } onCancel: {
            state.failRequestWaiter(id: id, reason: .cancelled)
        }
    }
}

// MARK: - State operations

extension ServerState {
    enum WaiterFailure {
        case timeout
        case cancelled
    }

    /// Records the arrival of a request head: logs it, counts it as in flight and resumes the
    /// waiters it satisfies. Returns the request's sequence number.
    func requestArrived(
        method: String,
        uri: String,
        path: String,
        headers: [RecordedRequest.Header],
        connectionID: Int
    ) -> Int {
        let (sequence, satisfied) = mutex.withLockedValue { state -> (Int, [RequestWaiter]) in
            let sequence = state.nextSequence
            state.nextSequence += 1
            state.requests.append(
                RecordedRequest(
                    method: method,
                    uri: uri,
                    path: path,
                    headers: headers,
                    bodyLength: 0,
                    sequence: sequence,
                    connectionID: connectionID
                )
            )
            state.inFlight += 1
            state.peakConcurrency = max(state.peakConcurrency, state.inFlight)

            var satisfied: [RequestWaiter] = []
            for id in Array(state.requestWaiters.keys) where path.hasPrefix(state.requestWaiters[id]!.pathPrefix) {
                state.requestWaiters[id]!.seen += 1
                if state.requestWaiters[id]!.seen >= state.requestWaiters[id]!.needed {
                    satisfied.append(state.requestWaiters.removeValue(forKey: id)!)
                }
            }
            return (sequence, satisfied)
        }
        for waiter in satisfied {
            waiter.timeout?.cancel()
            waiter.continuation.resume()
        }
        return sequence
    }

    /// Updates the body length of a logged request (ignored if the log was reset since).
    func requestBodyProgress(sequence: Int, bodyLength: Int) {
        mutex.withLockedValue { state in
            let index = sequence - state.firstSequenceInLog
            if index >= 0, index < state.requests.count {
                state.requests[index].bodyLength = bodyLength
            }
        }
    }

    /// A request stopped being in flight (response complete or connection gone).
    func requestFinished() {
        mutex.withLockedValue { $0.inFlight -= 1 }
    }

    /// Counts a request to `/flaky/ID` and returns how many there have been for `id`, this one
    /// included.
    func recordFlakyHit(_ id: String) -> Int {
        mutex.withLockedValue { state in
            let hits = (state.flakyHits[id] ?? 0) + 1
            state.flakyHits[id] = hits
            return hits
        }
    }

    func makeRequestWaiterID() -> Int {
        mutex.withLockedValue { state in
            defer { state.nextRequestWaiterID += 1 }
            return state.nextRequestWaiterID
        }
    }

    /// Stores a waiter, or resumes it at once (returning `false`) if it is already satisfied,
    /// was cancelled before it got here, or the server is shut down.
    func registerRequestWaiter(
        id: Int,
        pathPrefix: String,
        count: Int,
        _ continuation: CheckedContinuation<Void, any Error>
    ) -> Bool {
        let outcome = mutex.withLockedValue { state -> Result<Bool, any Error> in
            if state.cancelledRequestWaiters.remove(id) != nil {
                return .failure(CancellationError())
            }
            if state.isShutDown {
                return .failure(FixtureServerError.shutDown)
            }
            let seen = state.requests.reduce(0) { $0 + ($1.path.hasPrefix(pathPrefix) ? 1 : 0) }
            if seen >= count {
                return .success(false)
            }
            state.requestWaiters[id] = RequestWaiter(
                pathPrefix: pathPrefix,
                needed: count,
                seen: seen,
                continuation: continuation,
                timeout: nil
            )
            return .success(true)
        }
        switch outcome {
        case .success(true):
            return true
        case .success(false):
            continuation.resume()
            return false
        case .failure(let error):
            continuation.resume(throwing: error)
            return false
        }
    }

    func attachTimeout(_ timeout: Scheduled<Void>, toRequestWaiter id: Int) {
        let stillWaiting = mutex.withLockedValue { state -> Bool in
            guard state.requestWaiters[id] != nil else { return false }
            state.requestWaiters[id]!.timeout = timeout
            return true
        }
        if !stillWaiting {
            timeout.cancel()
        }
    }

    /// Fails a pending waiter. A cancellation that comes before the waiter is registered is
    /// remembered so that the registration fails at once.
    func failRequestWaiter(id: Int, reason: WaiterFailure) {
        let failed = mutex.withLockedValue { state -> (RequestWaiter, any Error)? in
            guard let waiter = state.requestWaiters.removeValue(forKey: id) else {
                if reason == .cancelled {
                    state.cancelledRequestWaiters.insert(id)
                }
                return nil
            }
            switch reason {
            case .timeout:
                let error = FixtureServerError.timedOut(
                    pathPrefix: waiter.pathPrefix,
                    expected: waiter.needed,
                    received: waiter.seen
                )
                return (waiter, error)
            case .cancelled:
                return (waiter, CancellationError())
            }
        }
        if let (waiter, error) = failed {
            waiter.timeout?.cancel()
            waiter.continuation.resume(throwing: error)
        }
    }
}
