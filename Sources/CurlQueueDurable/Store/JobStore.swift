public import Foundation

/// Where durable jobs live: one model, several implementations (an SQLite file, PostgreSQL).
///
/// Every method is one transaction: it happens entirely or not at all, and it is durable
/// when it returns (to the store's own durability setting). Methods may be called from any
/// task, concurrently, and from several processes (and, for a shared store, machines) on one
/// store. A method that throws changed nothing.
///
/// **Exact** in every implementation: a job is held by at most one lease at a time (claims
/// never overlap); an outcome is recorded at most once per lease (fencing) and only while the
/// lease is current; `enqueue` of equal jobs under ``JobSpec/DuplicatePolicy/replaceEarlier``
/// or ``JobSpec/DuplicatePolicy/skipIfPending`` leaves at most one pending job per key and queue.
/// **Best-effort**: ``wakeups(queue:)`` (workers poll as well), how soon a dead worker is
/// noticed (at once through a lock that dies with its process where the store has one, else
/// after the worker TTL), and when a running job's worker sees a cancel (its next heartbeat).
public protocol JobStore: Sendable {
    /// Adds jobs to `queue`, in one transaction: all or none. Each spec is checked with
    /// ``JobSpec/validated(limits:)`` first; one bad spec throws ``JobSpecError`` and nothing
    /// is stored. The results are in the order of `specs`. `order` says where the new jobs go
    /// among the pending ones of their priority: behind them (FIFO) or ahead (LIFO).
    func enqueue(_ specs: [JobSpec], queue: String, order: JobOrder) async throws -> [EnqueueResult]

    /// Announces a worker before it claims, with its liveness: the worker is alive until its
    /// TTL passes with no heartbeat or (where the store can tell) its process is gone.
    func register(_ worker: WorkerInfo) async throws

    /// Claims up to `limit` jobs of `queue` whose kind is in `kinds`, for `worker`: first jobs
    /// whose outcome is recorded but whose handler never returned (``ClaimedJob/recorded`` is
    /// set: run only the handler), then available jobs by priority (high first) and order.
    /// Each claimed available job becomes `running` with its attempt raised by one and a new
    /// fencing token. A paused queue gives only handler jobs. Due scheduled jobs are made
    /// available first. Never returns a job to two claimers.
    func claim(queue: String, kinds: Set<String>, limit: Int, worker: WorkerInfo.ID) async throws -> [ClaimedJob]

    /// Renews the worker's liveness (one lease for all its jobs) and records the checkpoints
    /// of its running downloads (only those it still holds). Returns which of its jobs it
    /// still holds, which of them were asked to cancel, or that it was declared dead: its
    /// jobs were given up, and it must stop every transfer and record nothing.
    func heartbeat(_ worker: WorkerInfo.ID, checkpoints: [JobID: Checkpoint]) async throws -> HeartbeatReply

    /// Records an attempt's outcome, fenced: returns false, and records nothing, when
    /// `lease` is no longer current (the job was rescued, released or claimed again).
    /// `.completed`, `.failed`, `.cancelled` make the job final and unhandled (the handler
    /// is to run, then ``markHandled(_:)``); `.retry` schedules it for its date when attempts
    /// remain (`attempt < maxAttempts`), else makes it failed with that reason.
    func finish(_ lease: Lease, _ outcome: JobOutcome) async throws -> Bool

    /// Records that the handler returned for the lease's recorded outcome. Fenced like
    /// ``finish(_:_:)``: false, nothing recorded, when the lease is no longer current.
    func markHandled(_ lease: Lease) async throws -> Bool

    /// Gives jobs back on a graceful stop: a running job becomes available again and its
    /// attempt does not count (its checkpoint is kept, for a resume); a job held only for its
    /// handler is left for another claim. Leases no longer current are ignored. A running job
    /// that may not be repeated (``JobSpec/isRescuable`` false) fails instead, with
    /// ``JobOutcome/mayHaveBeenSentReason``: its transfer may have reached the server.
    func release(_ leases: [Lease]) async throws

    /// Gives back jobs the store says `worker` holds but the worker does not run: a claim that
    /// committed but whose reply the worker never got (the connection dropped after COMMIT, a
    /// timeout). As ``release(_:)``: a running job becomes available again and its attempt does
    /// not count; a job held for its handler is left for another claim. Only jobs `worker`
    /// still holds are touched.
    func release(_ jobs: Set<JobID>, heldBy worker: WorkerInfo.ID) async throws

    /// Removes the worker after its last release: a worker that unregisters holds nothing.
    /// Jobs it still held are rescued as for a dead worker.
    func unregister(_ worker: WorkerInfo.ID) async throws

    /// Cancels jobs: pending (scheduled or available) ones become cancelled at once, handled
    /// (no handler runs for them); running ones are asked to cancel and their worker records
    /// the outcome. Final jobs are left as they are.
    func cancel(_ selector: JobSelector) async throws -> CancelResult

    /// Pauses or resumes a queue: a paused queue gives no new jobs to any claim; running ones
    /// go on.
    func setPaused(_ paused: Bool, queue: String) async throws

    /// Removes final, handled jobs of `queue` now, before the retention would: those in `ids`, or
    /// every one when `ids` is nil. Pending, running and unhandled jobs are left. Returns the ids
    /// removed, in increasing order (aria2's `removeDownloadResult` and `purgeDownloadResult`).
    func removeFinished(_ ids: Set<JobID>?, queue: String) async throws -> [JobID]

    /// The jobs that match `filter`, newest first.
    func jobs(_ filter: JobFilter) async throws -> [JobRecord]

    /// The number of jobs in each state (states with none are left out).
    func counts(queue: String?) async throws -> [JobState: Int]

    /// What a metrics scrape asks besides ``counts(queue:)``, in one cheap query: since when
    /// `queue`'s oldest available job has been due, and how many registered workers are alive
    /// (their registration not expired), by the store's clock.
    func health(queue: String) async throws -> StoreHealth

    /// Housekeeping, safe to run from every worker at any time: makes due scheduled jobs
    /// available; rescues the jobs of dead workers (a running job becomes available again, or
    /// failed when its attempts are spent or it may not be repeated, see
    /// ``JobSpec/isRescuable``; a recorded unhandled one is left for another claim); removes
    /// final, handled jobs older than the store's retention.
    func maintain() async throws -> MaintenanceReport

    /// Yields, best-effort, when `queue` may have new work (an enqueue, a release, a rescue,
    /// a resume). A worker polls as well: a missed wakeup only delays it.
    func wakeups(queue: String) -> AsyncStream<Void>
}

/// Where new jobs go among the pending jobs of their priority.
public enum JobOrder: String, Codable, Sendable, Hashable {
    /// Behind them: the oldest starts first.
    case fifo
    /// Ahead of them: the newest starts first.
    case lifo
}

/// What `enqueue` did with one spec.
public enum EnqueueResult: Sendable, Hashable {
    /// Added as `id`; `replaced` lists the equal jobs it cancelled (pending) or asked to
    /// cancel (running), under ``JobSpec/DuplicatePolicy/replaceEarlier``.
    case inserted(JobID, replaced: [JobID])
    /// Not added: an equal job is pending or running (``JobSpec/DuplicatePolicy/skipIfPending``).
    case skipped(existing: JobID)

    /// The job that now stands for the spec.
    public var id: JobID {
        switch self {
        case .inserted(let id, _), .skipped(let id): id
        }
    }
}

/// A worker process (or one worker of a process).
public struct WorkerInfo: Codable, Sendable, Hashable {
    /// A worker's id in the store.
    public typealias ID = String
    /// Unique among the store's workers: a UUID by default.
    public var id: ID
    /// The machine's name: where its `.part` files are.
    public var node: String
    /// Its process id on ``node`` (shown by `curlq status`; liveness on one machine).
    public var pid: Int32
    /// A worker; register it with the store before it claims.
    public init(id: ID = UUID().uuidString.lowercased(), node: String, pid: Int32) {
        self.id = id
        self.node = node
        self.pid = pid
    }
}

/// A job given to a worker by `claim`.
public struct ClaimedJob: Sendable, Hashable {
    /// The claim: every write for the job carries it.
    public var lease: Lease
    /// The job as the store held it when claimed.
    public var record: JobRecord
    /// Set when the outcome was recorded by an earlier holder whose handler did not return:
    /// run only the handler with it, then `markHandled`.
    public var recorded: JobOutcome?
    /// A claimed job (made by stores).
    public init(lease: Lease, record: JobRecord, recorded: JobOutcome? = nil) {
        self.lease = lease
        self.record = record
        self.recorded = recorded
    }
}

/// The store's answer to a heartbeat.
public enum HeartbeatReply: Sendable, Hashable {
    /// Alive: `held` are the jobs it still holds (running or awaiting their handler);
    /// `cancelRequested` those of them asked to cancel.
    case alive(held: Set<JobID>, cancelRequested: Set<JobID>)
    /// The worker is unknown or was declared dead: it holds nothing.
    case declaredDead
}

/// Which jobs `cancel` acts on.
public enum JobSelector: Sendable, Hashable {
    /// The job with this id.
    case id(JobID)
    /// Every job of `queue` with this ``JobSpec/dedupKey``.
    case key(String, queue: String)
    /// Every job of the queue.
    case queue(String)
}

/// What `cancel` did.
public struct CancelResult: Sendable, Hashable {
    /// Pending jobs now cancelled.
    public var cancelled: [JobID]
    /// Running jobs asked to cancel.
    public var requested: [JobID]
    /// A result (made by stores).
    public init(cancelled: [JobID] = [], requested: [JobID] = []) {
        self.cancelled = cancelled
        self.requested = requested
    }
}

/// Which jobs `jobs(_:)` returns.
public struct JobFilter: Sendable, Hashable {
    /// Nil: every queue.
    public var queue: String?
    /// Nil: every state.
    public var states: Set<JobState>?
    /// Nil: any id.
    public var ids: Set<JobID>?
    /// The most returned.
    public var limit: Int
    /// A filter; the default returns up to 1,000 jobs of every queue and state.
    public init(queue: String? = nil, states: Set<JobState>? = nil, ids: Set<JobID>? = nil, limit: Int = 1000) {
        self.queue = queue
        self.states = states
        self.ids = ids
        self.limit = limit
    }
}

/// A queue's health as its store sees it (``JobStore/health(queue:)``).
public struct StoreHealth: Sendable, Hashable {
    /// When the queue's oldest available job became due (its run time); nil when none waits.
    public var oldestAvailableSince: Date?
    /// Workers registered with the store whose registration has not expired (all queues).
    public var workersAlive: Int
    /// The store's clock when it answered.
    public var now: Date

    /// How long the oldest available job has waited; zero when none waits.
    public var oldestAvailableAge: Duration {
        guard let since = oldestAvailableSince else { return .zero }
        return .milliseconds(max(0, Int64((now.timeIntervalSince(since) * 1000).rounded())))
    }

    public init(oldestAvailableSince: Date?, workersAlive: Int, now: Date) {
        self.oldestAvailableSince = oldestAvailableSince
        self.workersAlive = workersAlive
        self.now = now
    }
}

/// What `maintain()` did.
public struct MaintenanceReport: Sendable, Hashable {
    /// Scheduled jobs made available.
    public var promoted: Int = 0
    /// Running jobs of dead workers made available again.
    public var rescued: Int = 0
    /// Running jobs of dead workers made failed (attempts spent, or not repeatable).
    public var failed: Int = 0
    /// Recorded outcomes whose worker died in their handler for the `maxAttempts`-th time:
    /// made failed and handled, with ``JobOutcome/handlerFailedReason``.
    public var handlerFailed: Int = 0
    /// Final jobs removed after the retention.
    public var pruned: Int = 0
    /// Workers found dead.
    public var deadWorkers: [WorkerInfo.ID] = []
    public init() {}
}
