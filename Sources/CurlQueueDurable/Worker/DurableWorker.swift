public import CurlQueue
public import Foundation

/// Runs durable jobs from a ``JobStore`` in a ``CurlQueue/RequestQueue``.
///
/// The worker claims only as many jobs as its queue has slots
/// (`maxConcurrentRequestCount`; 16 when that is 0), runs each as a `RequestOperation` there
/// (priorities, per-host limits, resume as in memory), keeps its lease alive with a
/// heartbeat, records each outcome with a fenced `finish`, then runs the handler registered
/// for the job's kind (see ``DurableJob`` for what a handler may rely on) and marks it
/// handled. It never claims a kind it has no handler for. Failed attempts are tried again
/// through the store (`.retry` with the job's backoff), so a restart keeps the schedule, and
/// a job that kills its worker each time fails once its attempts are spent.
///
/// The worker sets its queue's `allowDuplicateRequests` to true: equal jobs are the store's
/// business (``JobSpec/DuplicatePolicy``). Give it a queue of its own.
public final class DurableWorker: Sendable {
    /// Settings of a worker.
    public struct Configuration: Sendable {
        /// The store queue to take jobs from.
        public var queue: String = "default"
        /// Downloads go under this folder (job destinations are relative to it).
        public var folder: URL
        /// This machine's name.
        public var node: String = WorkerInfo.localNode
        /// 15 s. Must be well under the store's worker TTL (60 s by default).
        public var heartbeatInterval: Duration = .seconds(15)
        /// 45 s: with no successful heartbeat for this long the worker stops every transfer and
        /// records nothing more, before the store (TTL 60 s) gives its jobs to another.
        public var selfFence: Duration = .seconds(45)
        /// How often `maintain()` runs (promotion, rescue, pruning). 10 s.
        public var maintenanceInterval: Duration = .seconds(10)
        /// How long an idle worker waits between claims when no wakeup comes. 1 s.
        public var pollInterval: Duration = .seconds(1)
        /// 10 s: how long a stop waits, past its drain deadline, for the store to take what is
        /// still owed to it (the outcomes of finished transfers, the release of the rest). When
        /// the store stays unreachable, ``run()`` returns then without those writes: the jobs
        /// stay leased in the store, are rescued after its TTL (SQLite: once this process's
        /// lock is gone) and run again. They are listed in ``jobsLeftLeased``.
        public var storeGrace: Duration = .seconds(10)
        /// This boot of the machine (`/proc/sys/kernel/random/boot_id`), kept in checkpoints;
        /// internal so that a test can play a reboot.
        var bootID: String? = DurableWorker.currentBootID
        /// When this boot began (`btime` of `/proc/stat`); internal so that a test can play a reboot.
        var bootTime: Date? = DurableWorker.currentBootTime
        /// The worker's own settings for every job's request, applied after the job's
        /// (``JobRequest``) and before it runs: TLS options, a default `User-Agent`, time and
        /// speed limits, a shared rate limit. Called on the worker's task, never the engine
        /// thread; it must not block. Nil: the job's request as it is.
        public var prepareRequest: (@Sendable (inout Request, JobRecord) -> Void)?
        /// False (the default): a file already under a job's name is never replaced, but checked
        /// (its checksum, else the size the server announces) and taken as the job's outcome when
        /// whole (`curlq get`'s rule). True: it is downloaded again and replaced (`--overwrite`).
        public var replacesExistingFiles = false
        /// The defaults, downloading under `folder`.
        public init(folder: URL) { self.folder = folder }
    }

    /// The store it claims from and records in.
    public let store: any JobStore
    /// Where its jobs run: it claims only as many as this queue has free slots.
    public let requestQueue: RequestQueue
    /// Its settings, fixed at creation.
    public let configuration: Configuration
    /// This worker's identity in the store.
    public let info: WorkerInfo
    /// Its metrics; nil when no metrics factory was in effect when it was made.
    let metrics: Metrics?

    struct Registry {
        var handlers: [String: DurableJobHandler] = [:]
        var credentials: CredentialProvider?
        var events: AsyncStream<Event>.Continuation?
        var stopRequest: Duration?
        var leftLeased: [JobID] = []
        /// Running downloads' sizes as their responses announce them, and each one's last
        /// checkpoint (bytes, when), for the speed: what `curlq status` shows of another's jobs.
        var totals: [JobID: Int64] = [:]
        var lastSamples: [JobID: (bytes: Int64, at: ContinuousClock.Instant)] = [:]
        /// Running downloads as their transfers report them (``progress``).
        var live: [JobID: LiveSample] = [:]
    }

    /// One running download's figures from its progress reports; the speed is measured over
    /// windows of at least a second.
    struct LiveSample {
        var progress: Progress
        var windowStart: (bytes: Int64, at: ContinuousClock.Instant)

        mutating func report(_ transfer: TransferProgress, at now: ContinuousClock.Instant) {
            progress.bytes = transfer.bytesTransferred
            progress.total = transfer.totalBytes
            let seconds = (now - windowStart.at).seconds
            guard seconds >= 1 else { return }
            progress.bytesPerSecond = max(0, Double(transfer.bytesTransferred - windowStart.bytes) / seconds)
            windowStart = (transfer.bytesTransferred, now)
        }
    }

    /// How far a download this worker runs has come.
    public struct Progress: Sendable, Hashable {
        /// Bytes of the file so far (a resumed file's earlier bytes included).
        public var bytes: Int64
        /// Its size as the response announced it, if it did.
        public var total: Int64?
        /// Bytes per second over the last second or more; nil until a second has passed.
        public var bytesPerSecond: Double?
    }

    /// The downloads this worker runs now, as their transfers report them: live, where the
    /// store's checkpoints are as old as the last heartbeat. A job appears once its response
    /// head came, and goes when its transfer ends.
    public var progress: [JobID: Progress] {
        registry.withLock { $0.live.mapValues(\.progress) }
    }
    let registry = Locked(Registry())

    enum Event: Sendable {
        case tick
        case wakeup
        case claimed([ClaimedJob], limit: Int)
        case claimFailed
        case operationReady(JobID, RequestOperation)
        case transferEnded(JobID, JobOutcome, Response?)
        case finished(JobID, recorded: Bool)
        case finishFailed(JobID)
        case handlerReturned(JobID)
        case marked(JobID)
        case heartbeat(HeartbeatReply?, sentAt: ContinuousClock.Instant)
        case released
        case stop(Duration)
    }

    /// A worker; it does nothing until ``run()``. It sets the queue's
    /// `allowDuplicateRequests`: equal jobs are the store's to judge, not the queue's.
    ///
    /// Its metrics (claims, lease renewals, rescues, outcomes; docs/observability.md) go to the
    /// swift-metrics factory in effect now, labelled with ``Configuration/queue``; with none
    /// (swift-metrics' no-op factory) nothing is recorded.
    public init(store: any JobStore, requestQueue: RequestQueue, configuration: Configuration) {
        metrics = Metrics.make(queue: configuration.queue)
        self.store = store
        self.requestQueue = requestQueue
        self.configuration = configuration
        info = WorkerInfo(node: configuration.node, pid: getpid())
        requestQueue.allowDuplicateRequests = true
    }

    /// After ``run()`` returned: the jobs it stopped without recording or giving back, because
    /// the store was unreachable for the whole ``Configuration/storeGrace`` past the drain
    /// deadline. They are still leased to this worker in the store and are rescued after its
    /// TTL, then run again from the start (or their `.part`): a handler may see a job whose
    /// transfer had finished here run a second time. Empty when every write was made.
    public var jobsLeftLeased: [JobID] { registry.withLock { $0.leftLeased } }

    /// Registers the handler for jobs of `kind`. Call before ``run()``.
    public func register(kind: String, handler: @escaping DurableJobHandler) {
        registry.withLock { $0.handlers[kind] = handler }
    }

    /// Sets the provider that resolves jobs' credential references. Call before ``run()``.
    public func setCredentialProvider(_ provider: @escaping CredentialProvider) {
        registry.withLock { $0.credentials = provider }
    }

    func credentialProvider() -> CredentialProvider? {
        registry.withLock { $0.credentials }
    }

    /// Asks the worker to stop: it claims nothing more, lets running transfers (and handlers)
    /// run for up to `drain`, then cancels the rest and gives their jobs back to the store with
    /// their `.part` files kept (a release does not count as an attempt). ``run()`` returns
    /// once no job is held, or, when the store cannot be reached, at most
    /// ``Configuration/storeGrace`` after the deadline (see ``jobsLeftLeased``). Safe to call from any thread, at any time, more than once:
    /// a later call with a shorter `drain` (counted from that call) brings the deadline (and
    /// that bound) forward, a longer one changes nothing.
    public func stop(drain: Duration = .seconds(30)) {
        let events = registry.withLock { registry in
            registry.stopRequest = min(registry.stopRequest ?? drain, drain)
            return registry.events
        }
        events?.yield(.stop(drain))
    }

    /// Registers with the store and runs until ``stop(drain:)`` has given every job back.
    /// Throws only when the worker cannot register. Cancelling the task that awaits it is
    /// `stop(drain: .zero)`: it still returns only once the jobs are given back.
    public func run() async throws {
        // The loop runs in a task of its own, which does not inherit this one's cancellation:
        // a cancelled loop would end at once (an AsyncStream ends its iteration) and leave its
        // jobs `running` in the store until another worker's rescue.
        let loop = Task { try await runLoop() }
        try await withTaskCancellationHandler {
            try await loop.value
        } onCancel: {
            stop(drain: .zero)
        }
    }

    private func runLoop() async throws {
        try await store.register(info)
        let (events, continuation) = AsyncStream.makeStream(of: Event.self)
        let (handlers, pendingStop) = registry.withLock { registry in
            registry.events = continuation
            return (registry.handlers, registry.stopRequest)
        }
        let kinds = Set(handlers.keys)
        let clock = ContinuousClock()
        var machine = WorkerStateMachine(
            settings: .init(
                capacity: requestQueue.maxConcurrentRequestCount > 0 ? requestQueue.maxConcurrentRequestCount : 16,
                heartbeatInterval: configuration.heartbeatInterval, selfFence: configuration.selfFence,
                maintenanceInterval: configuration.maintenanceInterval, pollInterval: configuration.pollInterval,
                storeGrace: configuration.storeGrace),
            now: clock.now)
        let tick = min(configuration.pollInterval, configuration.heartbeatInterval / 3)
        var operations: [JobID: RequestOperation] = [:]
        var claims: [JobID: ClaimedJob] = [:]
        var responses: [JobID: Response] = [:]
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                // The sleep IS the event: the worker's timer (heartbeat, poll, deadlines).
                while !Task.isCancelled {
                    try? await Task.sleep(for: tick)
                    continuation.yield(.tick)
                }
            }
            let wakeups = store.wakeups(queue: configuration.queue)
            group.addTask {
                for await _ in wakeups { continuation.yield(.wakeup) }
            }
            var actions = machine.tick(now: clock.now)
            if let pendingStop { actions += machine.stop(now: clock.now, drain: pendingStop) }
            perform(actions)
            for await event in events {
                let now = clock.now
                switch event {
                case .tick: actions = machine.tick(now: now)
                case .wakeup: actions = machine.wakeup(now: now)
                case .claimed(let jobs, let limit):
                    for job in jobs { claims[job.lease.job] = job }
                    actions = machine.claimed(jobs, limit: limit, now: now)
                case .claimFailed: actions = machine.claimFailed(now: now)
                case .operationReady(let id, let operation):
                    actions = []
                    if case .transfer(nil)? = machine.held[id]?.stage {
                        operations[id] = operation
                        do { try requestQueue.add(operation) } catch { operation.cancel() }
                    } else {
                        // Cancelled (or the lease lost) while it was being made: never started.
                        continuation.yield(.transferEnded(id, .cancelled(reason: "cancelled"), nil))
                    }
                case .transferEnded(let id, let outcome, let response):
                    operations[id] = nil
                    responses[id] = response
                    actions = machine.transferEnded(id, outcome: outcome, now: now)
                case .finished(let id, let recorded): actions = machine.finished(id, recorded: recorded, now: now)
                case .finishFailed(let id): actions = machine.finishFailed(id)
                case .handlerReturned(let id): actions = machine.handlerReturned(id)
                case .marked(let id): actions = machine.marked(id, now: now)
                case .heartbeat(let reply?, let sentAt): actions = machine.heartbeatReplied(reply, sentAt: sentAt, now: now)
                case .heartbeat(nil, _): actions = machine.heartbeatFailed(now: now)
                case .released: actions = machine.released()
                case .stop(let drain): actions = machine.stop(now: now, drain: drain)
                }
                for id in claims.keys where machine.held[id] == nil && operations[id] == nil {
                    claims[id] = nil
                    responses[id] = nil
                }
                perform(actions)
                if machine.isStopped { break }
            }
            group.cancelAll()

            func perform(_ actions: [WorkerStateMachine.Action]) {
                for action in actions {
                    switch action {
                    case .claim(let limit):
                        group.addTask { [store, configuration, info, metrics] in
                            do {
                                let jobs = try await store.claim(queue: configuration.queue, kinds: kinds, limit: limit, worker: info.id)
                                metrics?.claimed.increment(by: jobs.count)
                                continuation.yield(.claimed(jobs, limit: limit))
                            } catch {
                                metrics?.claimFailures.increment()
                                continuation.yield(.claimFailed)
                            }
                        }
                    case .startTransfer(let job):
                        group.addTask { [self] in
                            if let operation = await makeOperation(job, continuation: continuation) {
                                continuation.yield(.operationReady(job.lease.job, operation))
                            }
                        }
                    case .cancelTransfer(let id):
                        operations[id]?.cancel()
                    case .finish(let lease, let outcome):
                        group.addTask { [store, metrics, folder = configuration.folder] in
                            do {
                                let recorded = try await store.finish(lease, outcome)
                                if recorded { metrics?.recorded(outcome) }
                                if recorded, case .completed(let result) = outcome, let file = result.file {
                                    Self.forgetFinished(folder.appendingPathComponent(file))
                                }
                                continuation.yield(.finished(lease.job, recorded: recorded))
                            } catch {
                                continuation.yield(.finishFailed(lease.job))
                            }
                        }
                    case .runHandler(let id, let outcome):
                        guard let job = claims[id], let handler = handlers[job.record.spec.kind] else {
                            continuation.yield(.handlerReturned(id))
                            continue
                        }
                        let response = responses[id]
                        var fileURL: URL?
                        if case .completed(let result) = outcome, let file = result.file {
                            fileURL = configuration.folder.appendingPathComponent(file)
                        }
                        let context = DurableJob(record: job.record, outcome: outcome, response: response, fileURL: fileURL)
                        group.addTask {
                            // Recorded: the file is the user's (also when a rescue runs this handler).
                            if let fileURL { Self.forgetFinished(fileURL) }
                            try? await handler(context)
                            continuation.yield(.handlerReturned(id))
                        }
                    case .markHandled(let lease):
                        group.addTask { [store] in
                            _ = try? await store.markHandled(lease)
                            continuation.yield(.marked(lease.job))
                        }
                    case .heartbeat(let jobs):
                        let sentAt = clock.now
                        let running = jobs.compactMap { claims[$0] }
                        group.addTask { [self, store, info] in
                            // Off the event loop: the checkpoints fsync the `.part` files.
                            let checkpoints = await flushedCheckpoints(running)
                            let reply = try? await store.heartbeat(info.id, checkpoints: checkpoints)
                            if reply != nil { metrics?.renewals.increment() } else { metrics?.renewalFailures.increment() }
                            continuation.yield(.heartbeat(reply, sentAt: sentAt))
                        }
                    case .maintain:
                        group.addTask { [store, metrics] in
                            if let report = try? await store.maintain(), report.rescued > 0 {
                                metrics?.rescued.increment(by: report.rescued)
                            }
                        }
                    case .release(let leases):
                        group.addTask { [store] in
                            // Released only once the store took it: a store that is down is asked
                            // again until it answers or the stop gives up at its grace (which
                            // cancels this task and names the jobs in `jobsLeftLeased`).
                            while !Task.isCancelled {
                                do {
                                    try await store.release(leases)
                                    continuation.yield(.released)
                                    return
                                } catch {
                                    try? await Task.sleep(for: .milliseconds(250))  // the pause between two asks
                                }
                            }
                        }
                    case .giveBack(let leases):
                        group.addTask { [store] in try? await store.release(leases) }
                    case .releaseUnknown(let ids):
                        group.addTask { [store, info] in try? await store.release(Set(ids), heldBy: info.id) }
                    case .reregister:
                        group.addTask { [store, info] in try? await store.register(info) }
                    case .gaveUp(let ids):
                        registry.withLock { $0.leftLeased = ids }
                    case .stopped:
                        break
                    }
                }
            }
        }
        registry.withLock { $0.events = nil }
        continuation.finish()
        try? await store.unregister(info.id)
    }
}
