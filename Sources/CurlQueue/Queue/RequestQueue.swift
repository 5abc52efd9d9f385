import Foundation

/// Runs ``RequestOperation``s with a limit on how many run at once, in first-in-first-out or
/// last-in-first-out order within three priorities, with suspension and duplicate cancellation.
///
/// Every member is safe to call from any thread, handlers included. Queues share the
/// process's one engine, so a high- and a low-priority queue in one daemon reuse the same
/// connections.
///
/// Contracts:
/// - Never more than ``maxConcurrentRequestCount`` operations run at once (an operation
///   waiting out a retry backoff keeps its slot), nor more than
///   ``maxConcurrentRequestsPerHost`` to one scheme, host and port.
/// - A pending operation that is cancelled leaves the queue at once; its completion handler
///   gets ``RequestError/cancelled`` exactly once.
/// - When an operation's completion handler runs, the queue no longer counts it.
public final class RequestQueue: Sendable {
    /// Where new operations join the queue.
    public enum Mode: Sendable, Hashable {
        /// New operations go to the back: the oldest pending operation starts first.
        case firstInFirstOut
        /// New operations go to the front: the newest pending operation starts first.
        /// Running operations are not affected.
        case lastInFirstOut
    }

    /// One queue shared by the whole process.
    public static let main = RequestQueue()

    struct State {
        var scheduler = Scheduler<ObjectIdentifier>()
        var operations: [ObjectIdentifier: RequestOperation] = [:]
        var byRequest: [Request: [ObjectIdentifier]] = [:]
        var allowDuplicateRequests = false
        var idleWaiters: [CheckedContinuation<Void, Never>] = []
        var subscribers: [Int: AsyncStream<Event>.Continuation] = [:]
        var nextSubscriberID = 0

        /// The operations of `ids`, pending ones first: cancelling a running one frees its
        /// slot at once, and that slot must not start one of the others on its way out.
        func pendingFirst(_ ids: [ObjectIdentifier]) -> [RequestOperation] {
            let ordered = ids.filter { !scheduler.isRunning($0) } + ids.filter { scheduler.isRunning($0) }
            return ordered.compactMap { operations[$0] }
        }
    }

    let state: Locked<State>

    /// Creates a queue.
    /// - Parameters:
    ///   - maxConcurrentRequestCount: The most operations running at once; 0 means no limit.
    ///   - queueMode: Where new operations join the queue.
    public init(maxConcurrentRequestCount: Int = 2, queueMode: Mode = .firstInFirstOut) {
        var state = State()
        state.scheduler.maxConcurrent = max(0, maxConcurrentRequestCount)
        state.scheduler.lifo = queueMode == .lastInFirstOut
        self.state = Locked(state)
    }

    // MARK: Settings

    /// The most operations running at once; 0 means no limit. Defaults to 2. Raising it
    /// starts pending operations at once; lowering it lets running ones finish.
    public var maxConcurrentRequestCount: Int {
        get { state.withLock { $0.scheduler.maxConcurrent } }
        set { update { $0.scheduler.maxConcurrent = max(0, newValue) } }
    }

    /// The most operations running at once to one origin (scheme, host and port); 0, the
    /// default, means no limit.
    public var maxConcurrentRequestsPerHost: Int {
        get { state.withLock { $0.scheduler.maxPerHost } }
        set { update { $0.scheduler.maxPerHost = max(0, newValue) } }
    }

    /// Where operations added from now on join the queue. Defaults to `.firstInFirstOut`.
    public var queueMode: Mode {
        get { state.withLock { $0.scheduler.lifo ? .lastInFirstOut : .firstInFirstOut } }
        set { state.withLock { $0.scheduler.lifo = newValue == .lastInFirstOut } }
    }

    /// While true, no operation starts; running ones go on. Setting it to false starts the
    /// next pending operations at once.
    public var isSuspended: Bool {
        get { state.withLock { $0.scheduler.isSuspended } }
        set { update { $0.scheduler.isSuspended = newValue } }
    }

    /// When false (the default), adding a request equal to one already in the queue, pending
    /// or running, cancels the earlier operation. When true, both are kept.
    public var allowDuplicateRequests: Bool {
        get { state.withLock { $0.allowDuplicateRequests } }
        set { state.withLock { $0.allowDuplicateRequests = newValue } }
    }

    /// The number of operations in the queue, running and pending.
    public var requestCount: Int { state.withLock { $0.scheduler.count } }

    /// The requests in the queue: running ones in the order they started, then pending ones
    /// in the order they will start.
    public var requests: [Request] { operations.map(\.request) }

    /// The operations in the queue, in the order of ``requests``.
    public var operations: [RequestOperation] {
        state.withLock { state in state.scheduler.orderedIDs().compactMap { state.operations[$0] } }
    }

    // MARK: Adding and cancelling

    /// Adds an operation; it starts as soon as the limits allow.
    /// - Throws: ``RequestOperationError/alreadyStarted`` when the operation was started or
    ///   added to a queue before.
    public func add(_ operation: RequestOperation) throws(RequestOperationError) {
        do {
            try operation.state.withLock { state throws(RequestOperation.StateMachine<Transfer>.StartError) in
                try state.machine.enqueue()
            }
        } catch {
            throw .alreadyStarted
        }
        let id = ObjectIdentifier(operation)
        let priority = operation.priority.rawValue
        let host = Self.origin(of: operation.request.url)
        let (duplicates, toStart, subscribers) = state.withLock { state in
            var duplicates: [RequestOperation] = []
            if !state.allowDuplicateRequests, let ids = state.byRequest[operation.request] {
                duplicates = state.pendingFirst(ids)
            }
            state.operations[id] = operation
            state.byRequest[operation.request, default: []].append(id)
            state.scheduler.add(id, priority: priority, host: host)
            return (duplicates, state.scheduler.nextToStart().compactMap { state.operations[$0] },
                    Array(state.subscribers.values))
        }
        if !subscribers.isEmpty {
            operation.setObserver { [weak self] event in self?.publish(event, for: operation) }
            for subscriber in subscribers { subscriber.yield(.added(operation)) }
        }
        operation.onFinish { [weak self] operation in self?.operationFinished(operation) }
        for duplicate in duplicates { duplicate.cancel() }
        start(toStart)
    }

    /// Makes an operation for `request`, adds it, and returns it.
    @discardableResult
    public func add(
        _ request: Request,
        completionHandler: (@Sendable (Result<Response, RequestError>) -> Void)? = nil
    ) -> RequestOperation {
        let operation = RequestOperation(request: request)
        operation.completionHandler = completionHandler
        try! add(operation)  // a new operation cannot have been started
        return operation
    }

    /// Cancels every operation in the queue whose request equals `request`, pending or running.
    public func cancel(_ request: Request) {
        let operations = state.withLock { state in state.pendingFirst(state.byRequest[request] ?? []) }
        for operation in operations { operation.cancel() }
    }

    /// Cancels every operation in the queue, pending and running.
    public func cancelAllRequests() {
        let operations = state.withLock { state in
            state.scheduler.orderedIDs().compactMap { state.operations[$0] }
        }
        for operation in operations.reversed() { operation.cancel() }
    }

    // MARK: Internals

    private func update(_ change: (inout State) -> Void) {
        let toStart = state.withLock { state in
            change(&state)
            return state.scheduler.nextToStart().compactMap { state.operations[$0] }
        }
        start(toStart)
    }

    private func start(_ operations: [RequestOperation]) {
        for operation in operations where !operation.startFromQueue() {
            operationFinished(operation)  // cancelled on its way out of the queue
        }
    }

    /// Called once an operation's outcome is decided, on the thread that decided it (often
    /// the engine thread, so the next operation starts there without a hop).
    private func operationFinished(_ operation: RequestOperation) {
        let id = ObjectIdentifier(operation)
        let (toStart, waiters) = state.withLock { state -> ([RequestOperation], [CheckedContinuation<Void, Never>]) in
            guard state.operations.removeValue(forKey: id) != nil else { return ([], []) }
            if var ids = state.byRequest[operation.request] {
                ids.removeAll { $0 == id }
                state.byRequest[operation.request] = ids.isEmpty ? nil : ids
            }
            state.scheduler.remove(id)
            let toStart = state.scheduler.nextToStart().compactMap { state.operations[$0] }
            var waiters: [CheckedContinuation<Void, Never>] = []
            if state.scheduler.count == 0 { swap(&waiters, &state.idleWaiters) }
            return (toStart, waiters)
        }
        start(toStart)
        for waiter in waiters { waiter.resume() }
    }

    /// The origin per-host limits count by: scheme, host and port.
    static func origin(of url: URL) -> String {
        let scheme = url.scheme?.lowercased() ?? ""
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\(url.host?.lowercased() ?? ""):\(port)"
    }
}
