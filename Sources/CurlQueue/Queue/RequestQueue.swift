package import Foundation
public import Tracing

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
/// - A queue that holds operations keeps itself alive until they have finished, as an
///   `OperationQueue` does: a queue nobody keeps still runs what was added to it. A suspended
///   queue nobody keeps never resumes, and so is never freed: cancel its operations first.
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

    /// An operation in the queue, with what the queue computed of it once, when it was added:
    /// the scheduler's payload for it.
    struct Member {
        let operation: RequestOperation
        /// `operation.request.hashValue`, its place in `sameRequest`.
        let requestHash: Int
    }

    /// The operations to start, picked under the lock and started out of it. Almost always
    /// none or one (a finished operation frees one slot), which it holds without an array.
    struct ToStart: Sequence {
        private var first: RequestOperation?
        private var rest: [RequestOperation] = []

        var isEmpty: Bool { first == nil }

        mutating func append(_ operation: RequestOperation) {
            if first == nil { first = operation } else { rest.append(operation) }
        }

        func makeIterator() -> Iterator { Iterator(first: first, rest: rest.makeIterator()) }

        struct Iterator: IteratorProtocol {
            fileprivate var first: RequestOperation?
            fileprivate var rest: IndexingIterator<[RequestOperation]>

            mutating func next() -> RequestOperation? {
                if let operation = first {
                    first = nil
                    return operation
                }
                return rest.next()
            }
        }
    }

    struct State: Sendable {
        var scheduler = Scheduler<OperationKey, Member>()
        var sameRequest = DuplicateIndex()
        var allowDuplicateRequests = false
        var idleWaiters: [CheckedContinuation<Void, Never>] = []
        var subscribers: [Int: AsyncStream<Event>.Continuation] = [:]
        var nextSubscriberID = 0
        /// The queue itself, while it holds operations: a queue that its owner let go of still
        /// starts and finishes them, as an `OperationQueue` does (its operations only know it
        /// weakly). Set when the first operation joins, cleared when the last one leaves.
        var keepAlive: RequestQueue?

        /// `operations`, pending ones first: cancelling a running one frees its slot at once,
        /// and that slot must not start one of the others on its way out.
        func pendingFirst(_ operations: [RequestOperation]) -> [RequestOperation] {
            guard !operations.isEmpty else { return [] }
            func isRunning(_ operation: RequestOperation) -> Bool { scheduler.isRunning(OperationKey(operation)) }
            return operations.filter { !isRunning($0) } + operations.filter(isRunning)
        }

        /// The operations in the queue: running ones in the order they started, then pending
        /// ones in the order they will start.
        func orderedOperations() -> [RequestOperation] {
            scheduler.ordered { _, member in member.operation }
        }

        /// Picks the operations that may start now and marks them running. While there is a
        /// per-host limit, an operation's origin is worked out here, once, when it first
        /// starts or waits for its host.
        mutating func nextToStart() -> ToStart {
            var toStart = ToStart()
            scheduler.startNext(hostOf: Self.origin, each: { _, member in toStart.append(member.operation) })
            return toStart
        }

        /// Sets the per-host limit. Setting one where there was none works out the origins of
        /// the running operations, which started without them.
        mutating func setMaxPerHost(_ limit: Int) {
            scheduler.setMaxPerHost(limit, hostOf: Self.origin)
        }

        private static func origin(of _: OperationKey, _ member: Member) -> String {
            RequestQueue.origin(of: member.operation.request.target)
        }
    }

    let state: Locked<State>

    /// The hook every operation of the queue runs when its outcome is decided: one closure,
    /// made with the queue and shared, rather than one allocated per operation. It is kept
    /// here and not in `State`: a closure read out through `withLock`'s generic result comes
    /// back wrapped in a reabstraction thunk, and storing that back would nest another
    /// thunk per operation.
    private let finishHook: @Sendable (RequestOperation) -> Void

    /// How `finishHook` reaches the queue without keeping it alive. `queue` is set once, in
    /// `init`, before any operation can hold the hook, and only read after that: a weak
    /// load is atomic, so the hook reads it without a lock.
    private final class WeakReference: @unchecked Sendable {
        weak var queue: RequestQueue?
    }

    /// The queue's name: the `queue` label of its metrics (docs/observability.md).
    public let name: String

    /// The queue's swift-metrics instruments; nil when no metrics backend was in effect when
    /// the queue was made, and then recording costs one nil check per event.
    let metrics: QueueMetrics?

    /// The tracer its operations' spans go to; nil when it is the no-op tracer, and then an
    /// operation does no span work (docs/observability.md#tracing).
    let tracing: QueueTracing?

    /// Creates a queue.
    ///
    /// Its metrics go to the swift-metrics factory in effect now (`MetricsSystem.factory`: the
    /// one bootstrapped, or one bound to the task with `withMetricsFactory`); a queue made while
    /// none is (swift-metrics' no-op factory) records nothing, at no cost. Bootstrap the
    /// metrics system before making queues.
    /// - Parameters:
    ///   - maxConcurrentRequestCount: The most operations running at once; 0 means no limit.
    ///   - queueMode: Where new operations join the queue.
    ///   - name: The `queue` label of the queue's metrics; keep it to a few fixed names.
    ///   - labelsMetricsByHost: When true, the metrics carry a `host` label too (the request
    ///     URL's host, lowercased): one label set per host the queue ever sees, so only for a
    ///     queue that talks to a known, small set of hosts.
    ///   - tracer: Where the spans of its operations go (one per operation and one per
    ///     attempt, docs/observability.md); nil, the default, means the tracer bootstrapped
    ///     now (`InstrumentationSystem.tracer`). With the no-op tracer (nothing bootstrapped,
    ///     or `NoOpTracer()` given) the queue makes no spans and injects no `traceparent`.
    public init(
        maxConcurrentRequestCount: Int = 2, queueMode: Mode = .firstInFirstOut, name: String = "default",
        labelsMetricsByHost: Bool = false, tracer: (any Tracer)? = nil
    ) {
        self.name = name
        metrics = QueueMetrics.make(queue: name, labelsByHost: labelsMetricsByHost)
        tracing = QueueTracing.make(tracer)
        var state = State()
        state.scheduler.maxConcurrent = max(0, maxConcurrentRequestCount)
        state.scheduler.lifo = queueMode == .lastInFirstOut
        self.state = Locked(state)
        let reference = WeakReference()
        finishHook = { operation in reference.queue?.operationFinished(operation) }
        reference.queue = self
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
        set { update { $0.setMaxPerHost(newValue) } }
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
        state.withLock { $0.orderedOperations() }
    }

    // MARK: Adding and cancelling

    /// Adds an operation; it starts as soon as the limits allow.
    /// - Throws: ``RequestOperationError/alreadyStarted`` when the operation was started or
    ///   added to a queue before.
    public func add(_ operation: RequestOperation) throws(RequestOperationError) {
        let priority: Int
        let instruments = metrics?.instruments(for: operation.request)
        // Its span starts here, on the caller's thread; set in the lock that enqueues it, so
        // that no outcome can be decided before it has it.
        let trace = tracing?.startOperation(operation.request, metrics: instruments)
        do {
            priority = try operation.state.withLock { state throws(RequestOperation.StateMachine<Attempt>.StartError) in
                try state.machine.enqueue()
                state.observers = RequestOperation.Observers(metrics: instruments, trace: trace)
                return state.priority.rawValue
            }
        } catch {
            trace?.span.end()
            throw .alreadyStarted
        }
        // Before the queue can start or finish it: every later event's decrement comes after.
        instruments?.pending.increment()
        let id = OperationKey(operation)
        // The request is hashed once, here, out of the lock.
        let requestHash = operation.request.hashValue
        let (duplicates, toStart) = state.withLock { state in
            let equal = state.sameRequest.insert(operation, hash: requestHash, findingEqual: !state.allowDuplicateRequests)
            let duplicates = state.pendingFirst(equal)
            let subscribers = state.subscribers.isEmpty ? [] : Array(state.subscribers.values)
            if !subscribers.isEmpty {
                // Before the operation can start, which another thread may do as soon as the
                // queue's lock is released: subscribers see `.added`, then `.started`. (The
                // operation's lock is only ever taken inside the queue's, never the other way
                // round; a yield runs no user code.) Its events go to the streams made before
                // it was added, and to no later one (`events()`).
                operation.setObserver { event in Self.publish(event, of: operation, to: subscribers) }
                for subscriber in subscribers { subscriber.yield(.added(operation)) }
            }
            state.scheduler.add(id, payload: Member(operation: operation, requestHash: requestHash), priority: priority)
            if state.keepAlive == nil { state.keepAlive = self }
            return (duplicates, state.nextToStart())
        }
        operation.onFinish(finishHook)
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
        let hash = request.hashValue
        let operations = state.withLock { state in
            state.pendingFirst(state.sameRequest.operations(equalTo: request, hash: hash))
        }
        for operation in operations { operation.cancel() }
    }

    /// Cancels every operation in the queue, pending and running.
    public func cancelAllRequests() {
        let operations = state.withLock { $0.orderedOperations() }
        for operation in operations.reversed() { operation.cancel() }
    }

    // MARK: Internals

    private func update(_ change: (inout State) -> Void) {
        let toStart = state.withLock { state in
            change(&state)
            return state.nextToStart()
        }
        start(toStart)
    }

    private func start(_ operations: ToStart) {
        for operation in operations {
            if operation.startFromQueue() {
                // After the engine has it: a fast finish may count `running` down first. The
                // meters only add and subtract, so they settle right.
                if let metrics { Self.recordStart(metrics.instruments(for: operation.request)) }
            } else {
                operationFinished(operation)  // cancelled on its way out of the queue
            }
        }
    }

    /// Out of line: a queue without metrics does not carry the calls inline.
    @inline(never)
    private static func recordStart(_ instruments: QueueMetrics.Instruments) {
        instruments.started.increment()
        instruments.pending.decrement()
        instruments.running.increment()
    }

    @inline(never)
    private func recordFinish(_ operation: RequestOperation, metrics: QueueMetrics, wasRunning: Bool) {
        let instruments = metrics.instruments(for: operation.request)
        if wasRunning { instruments.running.decrement() } else { instruments.pending.decrement() }
        if let result = operation.state.withLock({ $0.machine.result }) { instruments.finished(result) }
    }

    /// Called once an operation's outcome is decided, on the thread that decided it (often
    /// the engine thread, so the next operation starts there without a hop).
    private func operationFinished(_ operation: RequestOperation) {
        let id = OperationKey(operation)
        let (toStart, waiters, _, wasRunning) = state.withLock { state -> (ToStart, [CheckedContinuation<Void, Never>], RequestQueue?, Bool?) in
            guard let (member, wasRunning) = state.scheduler.take(id) else { return (ToStart(), [], nil, nil) }
            state.sameRequest.remove(operation, hash: member.requestHash)
            let toStart = state.nextToStart()
            var waiters: [CheckedContinuation<Void, Never>] = []
            var keptAlive: RequestQueue?
            if state.scheduler.count == 0 {
                swap(&waiters, &state.idleWaiters)
                swap(&keptAlive, &state.keepAlive)  // let go of after the lock
            }
            return (toStart, waiters, keptAlive, wasRunning)
        }
        if let metrics, let wasRunning { recordFinish(operation, metrics: metrics, wasRunning: wasRunning) }
        start(toStart)
        for waiter in waiters { waiter.resume() }
    }

    /// The origin per-host limits count by: scheme, host and port. `package`: curlq's
    /// `Admission` applies the same limit before a file reaches the queue, and must count by
    /// the same origin.
    package static func origin(of url: URL) -> String {
        origin(scheme: url.scheme, host: url.host, port: url.port)
    }

    /// The origin of a request's URL; one kept as a string is not parsed (the queue asks for
    /// origins under its lock, often on the engine thread).
    static func origin(of target: LazyURL) -> String {
        switch target {
        case .parsed(let url): origin(of: url)
        case .text(let text): origin(scheme: target.scheme, host: text.host, port: text.port)
        }
    }

    private static func origin(scheme: String?, host: String?, port: Int?) -> String {
        let scheme = scheme?.lowercased() ?? ""
        let port = port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\(host?.lowercased() ?? ""):\(port)"
    }
}
