public import Dispatch
public import Foundation
import Logging
import Tracing

/// One HTTP transfer: the request, its callbacks, and its retries.
///
/// An operation is single-use. ``start()`` runs it on its own; ``RequestQueue`` runs it in
/// turn. Either way:
///
/// - ``completionHandler`` is called **exactly once** for every operation that was started or
///   queued, with the response, the error, or ``RequestError/cancelled``. A second `cancel()`,
///   or a `cancel()` after completion, calls nothing.
/// - Every handler runs on ``callbackQueue`` (a serial queue shared by default), never on the
///   engine thread and never under a lock of CurlQueue's, so a handler may start, cancel or
///   add operations freely. On a serial queue, progress calls come before the completion.
/// - All members are safe to use from any thread.
public final class RequestOperation: Sendable {
    /// The operation's priority in a ``RequestQueue``: higher priorities start first.
    public enum Priority: Int, Comparable, Sendable, CaseIterable {
        /// Starts after every pending normal and high operation.
        case low = 0
        /// The default.
        case normal = 1
        /// Starts before every pending normal and low operation.
        case high = 2

        /// Orders priorities from low to high.
        public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// The serial queue handlers run on unless an operation names another.
    public static let defaultCallbackQueue = DispatchQueue(label: "CurlQueue.callbacks")

    /// Where retry waits end. A queue of its own, not `DispatchQueue.global()`: Dispatch gives
    /// the global queue only as many threads as cores, so while the program's own work blocks
    /// them every retry timer is late, and the late ones then fire together — a burst at the
    /// server, the jitter lost (RetryStormTests showed 50 retries arriving within 15 ms, 9 s
    /// late). A serial queue of its own always gets a thread. The work is a lock and a submit.
    static let retryTimers = DispatchQueue(label: "CurlQueue.retryTimers")

    /// The request this operation sends; fixed at creation.
    public let request: Request

    let engine: CurlEngine
    let state: Locked<State>

    struct State: Sendable {
        var machine = StateMachine<Attempt>()
        // The one-byte fields right after the machine, whose size (66) leaves 6 bytes before
        // the next 8-byte field: between 8-byte fields each took 8 (a pending operation is
        // small: a queue may hold 100,000 of them).
        var autoRetry = false
        var priority = Priority.normal
        var completionHandler: (@Sendable (Result<Response, RequestError>) -> Void)?
        var uploadProgressHandler: (@Sendable (TransferProgress) -> Void)?
        var downloadProgressHandler: (@Sendable (TransferProgress) -> Void)?
        var autoRetryErrorCodes = CurlCode.connectivityErrors
        /// Boxed, and absent while it is the default: a pending operation is small (a queue
        /// may hold 100,000 of them).
        var retryPolicy: RetryPolicy {
            get { customRetryPolicy?.value ?? RetryPolicy() }
            set { customRetryPolicy = newValue == RetryPolicy() ? nil : SharedValue(newValue) }
        }
        private var customRetryPolicy: SharedValue<RetryPolicy>?
        var callbackQueue = RequestOperation.defaultCallbackQueue
        /// Tasks awaiting the outcome. Each is resumed exactly once — by ``deliver(_:)``, which
        /// takes them all out under the lock, or at once by ``addWaiter(_:)`` when the outcome
        /// was already decided — and then reads the machine's `result` under the lock
        /// (``response()`` says why the outcome does not travel in the continuation).
        var waiters: [CheckedContinuation<Void, Never>] = []
        /// Hooks run when the outcome is decided: a queue's is the only one in practice, so
        /// the first is kept inline and only further ones take an array.
        var finishHook: (@Sendable (RequestOperation) -> Void)?
        var moreFinishHooks: [@Sendable (RequestOperation) -> Void] = []
        var observer: (@Sendable (Observation) -> Void)?
        var responseHeadHandler: (@Sendable (ResponseHead) -> Void)?
        var responseBodyHandler: (@Sendable (Data) -> Void)?
        /// Where a streamed body goes: made at the start from ``responseBodyHandler``, or by
        /// ``stream()`` before it.
        var bodyStream: BodyStream?
        /// Why the last retried attempt failed (``lastRetriedAttempt``); boxed, as `retryPolicy`.
        var lastRetried: SharedValue<RetriedAttempt>?
        /// What its queue observes it with, set when it joins the queue: one word for both.
        var observers = Observers.none
        /// Its queue's metrics, when the queue records any: where retries are counted.
        var metrics: QueueMetrics.Instruments? { observers.metrics }
        /// Its spans, when its queue traces (docs/observability.md#tracing).
        var trace: OperationTrace? { observers.trace }
    }

    /// An operation's queue's metrics instruments and its spans, in one word of ``State`` (a
    /// pending operation is small): a trace carries the instruments when there are both.
    enum Observers: Sendable {
        case none
        case metrics(QueueMetrics.Instruments)
        case traced(OperationTrace)

        init(metrics: QueueMetrics.Instruments?, trace: OperationTrace?) {
            if let trace {
                self = .traced(trace)
            } else if let metrics {
                self = .metrics(metrics)
            } else {
                self = .none
            }
        }

        var metrics: QueueMetrics.Instruments? {
            switch self {
            case .none: nil
            case .metrics(let metrics): metrics
            case .traced(let trace): trace.metrics
            }
        }

        var trace: OperationTrace? {
            if case .traced(let trace) = self { return trace }
            return nil
        }
    }

    /// Creates an operation for `request`. Nothing happens until it is started or queued.
    public init(request: Request) {
        self.request = request
        self.engine = .shared
        self.state = Locked(State())
        if request.tls.insecureSkipsVerificationForLocalTestingOnly {
            logger.warning("TLS verification is off for this request (insecureSkipsVerificationForLocalTestingOnly)",
                           metadata: ["url": "\(SecretRedactor.standard.redact(request.url))"])
        }
    }

    // MARK: Configuration

    // Each handler's setter swaps the new closure in under the lock, and the replaced one is
    // released after it: it may hold the last reference to an object whose `deinit` reaches
    // this operation. (Not through `swap` or a generic helper: a closure passed as a generic
    // value is wrapped in a thunk, an allocation per handler kept for the operation's life.)

    /// Called once when the operation ends: with the ``Response`` (any HTTP status), or with
    /// the error, ``RequestError/cancelled`` included. Runs on ``callbackQueue``.
    public var completionHandler: (@Sendable (Result<Response, RequestError>) -> Void)? {
        get { state.withLock { $0.completionHandler } }
        set {
            var replaced = newValue
            state.withLock { state in (state.completionHandler, replaced) = (replaced, state.completionHandler) }  // the old one goes after the lock
        }
    }

    /// Called as the request body is sent, at most about every 50 ms, with monotonic values,
    /// from the first bytes sent on (before the response head), and once more at a successful
    /// end with the bytes sent as the total.
    public var uploadProgressHandler: (@Sendable (TransferProgress) -> Void)? {
        get { state.withLock { $0.uploadProgressHandler } }
        set {
            var replaced = newValue
            state.withLock { state in (state.uploadProgressHandler, replaced) = (replaced, state.uploadProgressHandler) }  // the old one goes after the lock
        }
    }

    /// Called as the response body arrives, at most about every 50 ms, with monotonic values,
    /// and once more at a successful end with the final size as the total (fraction 1.0).
    /// Set it before the operation starts; a handler set later may miss the early calls.
    ///
    /// No call comes before the head of the response whose body it counts (redirects followed
    /// and interim responses are not counted): from the first call on, a resumed download's
    /// values include the bytes already on disk and never go below them, and when the server
    /// announced the size (`Content-Length`, plus the bytes on disk for a 206) every call
    /// carries it as the total. A ``RequestQueue``'s `.progress` events follow the same rule.
    public var downloadProgressHandler: (@Sendable (TransferProgress) -> Void)? {
        get { state.withLock { $0.downloadProgressHandler } }
        set {
            var replaced = newValue
            state.withLock { state in (state.downloadProgressHandler, replaced) = (replaced, state.downloadProgressHandler) }  // the old one goes after the lock
        }
    }

    /// When set, the response body is streamed to this handler instead of being kept: it is
    /// called with each chunk as it arrives, in order, on ``callbackQueue``, and
    /// ``Response/body`` is then empty. Set it before the operation starts.
    ///
    /// - On a serial ``callbackQueue`` (the default) every chunk, and ``responseHeadHandler``
    ///   before them, runs before the completion handler; its `Response` has the status and
    ///   fields of the head. Chunks already dispatched still run when the operation is
    ///   cancelled.
    /// - Chunks whose handler has not returned stay bounded: past 1 MiB the transfer pauses
    ///   (libcurl stops reading the socket) until the handler has caught up to 256 KiB.
    /// - The body streamed is the final response's, whatever its status. Once its head was
    ///   handed over (``responseHeadHandler``) the operation is not retried: a failure
    ///   completes with the error. Responses with a status ``autoRetry`` may retry are kept in
    ///   memory until it is decided that no retry follows, then streamed in one chunk.
    /// - A streamed body does not go to the request's `destination` and is not discarded by
    ///   its `discardsBody`; `maxResponseBodySize` still applies.
    public var responseBodyHandler: (@Sendable (Data) -> Void)? {
        get { state.withLock { $0.responseBodyHandler } }
        set {
            var replaced = newValue
            state.withLock { state in (state.responseBodyHandler, replaced) = (replaced, state.responseBodyHandler) }  // the old one goes after the lock
        }
    }

    /// With ``responseBodyHandler``: called once on ``callbackQueue`` with the status and
    /// fields of the response whose body is streamed, before its first chunk — as soon as the
    /// head arrived, so a long-lived response (server-sent events, a feed) can be checked before
    /// any of its body. Not called when the operation fails before that head. Set it before the
    /// operation starts.
    public var responseHeadHandler: (@Sendable (ResponseHead) -> Void)? {
        get { state.withLock { $0.responseHeadHandler } }
        set {
            var replaced = newValue
            state.withLock { state in (state.responseHeadHandler, replaced) = (replaced, state.responseHeadHandler) }  // the old one goes after the lock
        }
    }

    /// When true, a failure whose code is in ``autoRetryErrorCodes`` (or a response whose
    /// status is in the policy's `retryableStatuses`) starts another attempt after a backoff,
    /// up to ``retryPolicy``'s `maxAttempts`, instead of completing. Defaults to false.
    /// Malformed URLs, certificate failures, write errors and other statuses never retry.
    ///
    /// Whatever this says, an idempotent request (GET, HEAD, PUT, DELETE, OPTIONS, TRACE)
    /// that a reused connection fails at once, with stray bytes of an earlier response where
    /// its answer should start (code 1), is sent once more on a new connection within the same
    /// attempt: the fault was the connection's, not the server's answer to it. So is one that
    /// a reused connection closed without a byte of answer (libcurl's own resend). A request
    /// that is not idempotent (POST, PATCH, …) is never sent twice within an attempt: the
    /// server may have acted on it. Such a close fails it with ``CurlCode/gotNothing``, which
    /// this setting retries.
    public var autoRetry: Bool {
        get { state.withLock { $0.autoRetry } }
        set { state.withLock { $0.autoRetry = newValue } }
    }

    /// The libcurl codes that ``autoRetry`` retries; by default
    /// ``CurlCode/connectivityErrors``, the codes of poor or no connectivity.
    public var autoRetryErrorCodes: Set<CurlCode> {
        get { state.withLock { $0.autoRetryErrorCodes } }
        set { state.withLock { $0.autoRetryErrorCodes = newValue } }
    }

    /// How many attempts ``autoRetry`` makes and how long it waits between them.
    public var retryPolicy: RetryPolicy {
        get { state.withLock { $0.retryPolicy } }
        set { state.withLock { $0.retryPolicy = newValue } }
    }

    /// The priority in a ``RequestQueue``; read when the operation is added. Defaults to `.normal`.
    public var priority: Priority {
        get { state.withLock { $0.priority } }
        set { state.withLock { $0.priority = newValue } }
    }

    /// Where handlers run. Defaults to ``defaultCallbackQueue``, which is serial. With a
    /// concurrent queue, progress and completion calls may overlap.
    public var callbackQueue: DispatchQueue {
        get { state.withLock { $0.callbackQueue } }
        set { state.withLock { $0.callbackQueue = newValue } }
    }

    /// True once the outcome is decided (the completion handler may still be on its way).
    public var isFinished: Bool { state.withLock { $0.machine.isFinished } }

    /// True once the operation was cancelled before it finished.
    public var isCancelled: Bool { state.withLock { $0.machine.isCancelled } }

    /// True until its first attempt begins: idle, or waiting in a queue for its turn.
    var isBeforeFirstAttempt: Bool { state.withLock { $0.machine.isBeforeFirstAttempt } }

    // MARK: Running

    /// Starts the operation on its own, outside any queue.
    /// - Throws: ``RequestOperationError/alreadyStarted`` when it was started or queued before.
    public func start() throws(RequestOperationError) {
        let action = try state.withLock { state throws(RequestOperationError) in
            let next = makeAttempt(number: 1, &state)
            do {
                return try state.machine.start(handle: next, fromQueue: false)
            } catch {
                throw RequestOperationError.alreadyStarted
            }
        }
        perform(action)
    }

    /// Cancels the operation, from any thread, at any moment: before it starts, while it
    /// connects, mid-body, or while it waits to retry. The transfer leaves the engine
    /// promptly, a download's `.part` file is kept for a later resume, and the completion
    /// handler gets ``RequestError/cancelled`` — once the engine has let go of the transfer,
    /// so nothing more is written after it. Does nothing once the operation finished.
    public func cancel() {
        let action = state.withLock { $0.machine.cancel() }
        perform(action)
    }

    // MARK: Internals

    func makeAttempt(number attempt: Int, _ state: inout State) -> Attempt {
        if attempt == 1, state.bodyStream == nil, let body = state.responseBodyHandler, state.machine.isBeforeFirstAttempt {
            state.bodyStream = BodyStream(mode: .push(queue: state.callbackQueue, head: state.responseHeadHandler, body: body))
        }
        var statusesNotStreamed: Set<Int> = []
        if state.bodyStream != nil, state.autoRetry, attempt < state.retryPolicy.maxAttempts {
            statusesNotStreamed = state.retryPolicy.retryableStatuses
        }
        return Attempt(
            request: request, number: attempt,
            wantsProgress: state.downloadProgressHandler != nil || state.uploadProgressHandler != nil
                || state.observer != nil,
            delegate: self, engine: engine, bodyStream: state.bodyStream, statusesNotStreamed: statusesNotStreamed)
    }

    func perform(_ action: StateMachine<Attempt>.Action) {
        switch action {
        case .none:
            break
        case .startAttempt(let attempt):
            engine.submit(attempt)
        case .cancelAttempt(let attempt):
            engine.cancel(attempt)
        case .scheduleRetry(let attempt, let delay):
            state.withLock { $0.observer }?(.retrying(attempt: attempt + 1, delay: delay))
            if let (metrics, retried) = state.withLock({ state in state.metrics.map { ($0, state.lastRetried?.value) } }),
               let retried {
                metrics.retried(retried.cause)
            }
            if let (trace, retried, queue) = state.withLock({ state in state.trace.map { ($0, state.lastRetried?.value, state.callbackQueue) } }),
               let retried, let span = trace.takeAttemptSpan() {
                let now = DefaultTracerClock.now
                queue.async { OperationTrace.endRetried(span, cause: retried.cause, at: now) }
            }
            Self.retryTimers.asyncAfter(deadline: .now() + delay.seconds) { [self] in
                retryTimerFired(attempt: attempt)
            }
        case .complete(let result):
            deliver(result)
        }
    }

    private func retryTimerFired(attempt: Int) {
        let (action, trace) = state.withLock { state -> (StateMachine<Attempt>.Action, OperationTrace?) in
            guard state.machine.pendingRetryAttempt == attempt + 1 else { return (.none, nil) }
            let next = makeAttempt(number: attempt + 1, &state)
            return (state.machine.retryTimerFired(attempt: attempt, handle: next), state.trace)
        }
        if case .startAttempt(let next) = action {
            logger.debug("retrying", metadata: ["url": "\(SecretRedactor.standard.redact(request.url))", "attempt": "\(attempt + 1)"])
            if let trace {
                submit(next, tracedBy: trace, onCallersThread: false)  // not on the retry timers' queue
                return
            }
        }
        perform(action)
    }

    /// Submits a traced attempt once its span started and its context is in its header fields.
    /// The span starts here when the caller's thread may run user code (the thread that added
    /// or started the operation), else on ``OperationTrace/queue``: never on the engine thread.
    /// A cancel meanwhile is not lost: the engine drops an attempt cancelled before it came.
    func submit(_ attempt: Attempt, tracedBy trace: OperationTrace, onCallersThread: Bool) {
        if onCallersThread, !engine.isOnEngineThread {
            trace.startAttempt(attempt)
            engine.submit(attempt)
        } else {
            OperationTrace.queue.async { [engine] in
                trace.startAttempt(attempt)
                engine.submit(attempt)
            }
        }
    }

    /// Runs once per operation: internal hooks first (a queue frees the slot), then the
    /// awaiting tasks, then the user's handlers on the callback queue. Every handler leaves the
    /// operation here (a handler that captures its operation no longer keeps it alive), and is
    /// let go of on the callback queue.
    ///
    /// `outcome` is the whole one, for the stream; everyone else gets the machine's `result`,
    /// decided under the lock with the transition that returned `.complete`.
    private func deliver(_ outcome: Result<Response, RequestError>) {
        if let stream = state.withLock({ $0.bodyStream }) {
            // The stream gets what remains (the head, a body kept in memory) before the
            // completion is dispatched, so its chunks come first on a serial callback queue.
            stream.finish(outcome)
        }
        let recipients = state.withLock { state in
            guard let result = state.machine.result else { preconditionFailure("delivered before the outcome was decided") }
            defer {
                state.observer = nil
                state.completionHandler = nil
                state.downloadProgressHandler = nil
                state.uploadProgressHandler = nil
                state.responseHeadHandler = nil
                state.responseBodyHandler = nil
                state.bodyStream = nil
                state.waiters = []
                state.finishHook = nil
                state.moreFinishHooks = []
            }
            var streaming: StreamingHandlers?
            if state.responseHeadHandler != nil || state.responseBodyHandler != nil || state.bodyStream != nil {
                streaming = StreamingHandlers(
                    head: state.responseHeadHandler, body: state.responseBodyHandler, stream: state.bodyStream)
            }
            return Recipients(
                result: result,
                handlers: CompletionHandlers(
                    completion: state.completionHandler, download: state.downloadProgressHandler,
                    upload: state.uploadProgressHandler, lastDownload: state.machine.lastDownload, lastUpload: state.machine.lastUpload,
                    streaming: streaming),
                waiters: state.waiters, finishHook: state.finishHook, moreFinishHooks: state.moreFinishHooks,
                queue: state.callbackQueue, observer: state.observer, trace: state.trace)
        }
        let result = recipients.result
        if let trace = recipients.trace {
            // Ended where the handlers go, at the instant the outcome was decided.
            let span = trace.takeAttemptSpan(), now = DefaultTracerClock.now
            recipients.queue.async { trace.end(result, attemptSpan: span, at: now) }
        }
        recipients.finishHook?(self)
        for hook in recipients.moreFinishHooks { hook(self) }
        recipients.observer?(.finished(result))
        let handlers = recipients.handlers, waiters = recipients.waiters, queue = recipients.queue
        let callsHandlers = !handlers.isEmpty
        guard !waiters.isEmpty || callsHandlers else { return }
        // On the engine thread the hooks above may have started the queue's next operation:
        // let it go out on the wire before other threads are woken for this one's result.
        // The engine then hands the handlers of all the operations that finished in the turn
        // to the default callback queue at once.
        if engine.isOnEngineThread {
            if !waiters.isEmpty {
                engine.resumeAfterThisTurn { for waiter in waiters { waiter.resume() } }
            }
            if callsHandlers {
                // The default queue is serial: its handlers may share a block.
                engine.afterThisTurn(on: queue, batched: queue === Self.defaultCallbackQueue) { handlers.call(with: result) }
            }
        } else {
            for waiter in waiters { waiter.resume() }
            if callsHandlers {
                queue.async { handlers.call(with: result) }
            }
        }
    }

    /// Everything a finished operation's outcome goes to, taken out of its state at once.
    ///
    /// A struct, not a tuple: closures in a tuple that `withLock` returns as its generic
    /// result are converted to the generic calling convention and back, which allocated a
    /// thunk for each one (two per operation) and called the hooks through it.
    private struct Recipients {
        let result: Result<Response, RequestError>
        let handlers: CompletionHandlers
        let waiters: [CheckedContinuation<Void, Never>]
        let finishHook: (@Sendable (RequestOperation) -> Void)?
        let moreFinishHooks: [@Sendable (RequestOperation) -> Void]
        let queue: DispatchQueue
        let observer: (@Sendable (Observation) -> Void)?
        let trace: OperationTrace?
    }

    /// The handlers of a finished operation, taken out of its state to be called once.
    private struct CompletionHandlers: Sendable {
        let completion: (@Sendable (Result<Response, RequestError>) -> Void)?
        let download: (@Sendable (TransferProgress) -> Void)?
        let upload: (@Sendable (TransferProgress) -> Void)?
        let lastDownload: TransferProgress?
        let lastUpload: TransferProgress?
        /// Not called: kept so that they are let go of here, on the callback queue. They often
        /// hold the operation, or the last reference to an object of the caller's, whose
        /// `deinit` must not run on the engine thread.
        let streaming: StreamingHandlers?

        var isEmpty: Bool { completion == nil && download == nil && upload == nil && streaming == nil }

        /// On the callback queue: the final progress (a successful end's sizes), then the
        /// completion.
        func call(with result: Result<Response, RequestError>) {
            if download != nil || upload != nil {
                // The final sizes (a stat of a downloaded file) only for progress handlers.
                let final = RequestOperation.finalProgress(result, lastDownload: lastDownload, lastUpload: lastUpload)
                if let download, let progress = final.download { download(progress) }
                if let upload, let progress = final.upload { upload(progress) }
            }
            completion?(result)
        }
    }

    /// The streaming handlers of a finished operation and its stream (which holds them too).
    private struct StreamingHandlers: Sendable {
        let head: (@Sendable (ResponseHead) -> Void)?
        let body: (@Sendable (Data) -> Void)?
        let stream: BodyStream?
    }

    private static func finalProgress(
        _ result: Result<Response, RequestError>, lastDownload: TransferProgress?, lastUpload: TransferProgress?
    ) -> (download: TransferProgress?, upload: TransferProgress?) {
        guard case .success(let response) = result else { return (nil, nil) }
        // A discarded body is not in `body`: libcurl's count of body bytes then tells its size.
        var received = Swift.max(Int64(response.body.count), response.metrics.bytesReceived)
        if let file = response.fileURL,
           let size = (try? FileManager.default.attributesOfItem(atPath: file.path))?[.size] as? NSNumber {
            received = size.int64Value
        }
        received = max(received, lastDownload?.bytesTransferred ?? 0)
        let sent = max(response.metrics.bytesSent, lastUpload?.bytesTransferred ?? 0)
        return (TransferProgress(bytesTransferred: received, totalBytes: received),
                sent > 0 ? TransferProgress(bytesTransferred: sent, totalBytes: sent) : nil)
    }

    /// Registers an internal hook run when the outcome is decided (before user handlers),
    /// on the thread that decided it. Runs at once when the operation already finished.
    /// `package`, not public: the hook may run on the engine thread, where no user code runs;
    /// CurlQueueClient's coalescing only resumes continuations in it (docs/architecture.md).
    package func onFinish(_ hook: @escaping @Sendable (RequestOperation) -> Void) {
        let finished = state.withLock { state in
            if state.machine.result != nil { return true }
            if state.finishHook == nil {
                state.finishHook = hook
            } else {
                state.moreFinishHooks.append(hook)
            }
            return false
        }
        if finished { hook(self) }
    }

    /// What a queue observes of an operation, on the thread where it happens (often the
    /// engine thread): the observer must not block.
    enum Observation {
        case started
        case progress(download: TransferProgress, upload: TransferProgress)
        case retrying(attempt: Int, delay: Duration)
        case finished(Result<Response, RequestError>)
    }

    func setObserver(_ observer: @escaping @Sendable (Observation) -> Void) {
        state.withLock { $0.observer = observer }
    }

    /// Starts the first attempt when a queue gives the operation its turn. Returns false when
    /// the operation was cancelled while it waited.
    func startFromQueue() -> Bool {
        let (action, observer, trace) = state.withLock {
            state -> (StateMachine<Attempt>.Action, (@Sendable (Observation) -> Void)?, OperationTrace?) in
            let next = makeAttempt(number: 1, &state)
            return ((try? state.machine.start(handle: next, fromQueue: true)) ?? .none, state.observer, state.trace)
        }
        guard case .startAttempt(let attempt) = action else { return false }
        observer?(.started)  // before the engine has the transfer: no progress can come first
        if let trace {
            submit(attempt, tracedBy: trace, onCallersThread: true)
        } else {
            perform(action)
        }
        return true
    }

    /// Files `continuation` to be resumed once the outcome is decided (at once when it is);
    /// returns whether the operation is idle, for the caller to start it.
    func addWaiter(_ continuation: CheckedContinuation<Void, Never>) -> Bool {
        let (decided, shouldStart) = state.withLock { state -> (Bool, Bool) in
            if state.machine.result != nil { return (true, false) }
            state.waiters.append(continuation)
            if case .idle = state.machine.state { return (false, true) }
            return (false, false)
        }
        if decided { continuation.resume() }
        return shouldStart
    }
}

/// Misuse of a ``RequestOperation``.
public enum RequestOperationError: Error, Hashable, Sendable {
    /// The operation was started or added to a queue before; operations are single-use.
    case alreadyStarted
}

/// The library's own log (label `CurlQueue`: the insecure-TLS warning, retries). Made at each
/// use, which is rare, so that a logging system bootstrapped after the first use gets the
/// entries too. URLs in its entries go through ``SecretRedactor/standard``.
var logger: Logger { Logger(label: "CurlQueue") }

/// An immutable value on the heap, for rarely set state kept out of a struct's inline size.
final class SharedValue<Value: Sendable>: Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
