public import CurlQueueDownloads
public import Foundation

/// A job's id in its store: the enqueue sequence, unique in the store.
public typealias JobID = Int64

/// Where a job is in its life.
///
/// ```
/// scheduled ──due──▶ available ──claim──▶ running ──finish──▶ completed | failed | cancelled
///     ▲                 ▲                    │
///     └─finish(.retry)──┼────────────────────┤
///                       └─release / rescue───┘
/// ```
/// `completed`, `failed` and `cancelled` are final. A final job whose outcome a worker
/// recorded is "unhandled" until its handler returned (``JobRecord/handled``).
public enum JobState: String, Codable, Sendable, Hashable, CaseIterable {
    /// Waiting for its ``JobRecord/runAt`` (a retry's backoff, or a job enqueued for later).
    case scheduled
    /// Waiting for a worker.
    case available
    /// Claimed by a worker, which holds its lease.
    case running
    /// Final: the transfer finished with a 2xx status (its file, if any, complete under its name).
    case completed
    /// Final: failed for good (attempts spent, or an error no retry can fix).
    case failed
    /// Final: cancelled through the store, or replaced by a newer equal job.
    case cancelled

    /// completed, failed or cancelled.
    public var isFinal: Bool { self == .completed || self == .failed || self == .cancelled }
}

/// A claim of one job by one worker: the job and its fencing token. Every write a worker makes
/// for the job carries the lease; the store ignores it once the token is no longer current
/// (the job was rescued, released or claimed again).
public struct Lease: Codable, Sendable, Hashable {
    /// The job claimed.
    public var job: JobID
    /// Raised by one at each claim.
    public var token: Int64
    /// A lease on `job` under `token`.
    public init(job: JobID, token: Int64) {
        self.job = job
        self.token = token
    }
}

/// How an attempt ended, as the worker records it with `finish`.
public enum JobOutcome: Codable, Sendable, Hashable {
    /// The transfer is done with a 2xx status, or its file was already there whole.
    case completed(JobResult)
    /// Try again at `at`, if attempts remain; else the job fails with `reason` and `kind`.
    case retry(reason: String, at: Date, kind: DownloadFailureKind? = nil)
    /// Failed for good: `reason` in words, `kind` for scripts (nil in rows recorded before
    /// kinds were kept, and for failures that are no download's: a handler's, a worker's death).
    case failed(reason: String, kind: DownloadFailureKind? = nil)
    /// Cancelled while running (asked through the store, or replaced by a newer equal job).
    case cancelled(reason: String)
}

extension JobOutcome {
    /// The kind of a failure (or of the failure a retry follows); nil otherwise.
    public var failureKind: DownloadFailureKind? {
        switch self {
        case .failed(_, let kind), .retry(_, _, let kind): return kind
        case .completed, .cancelled: return nil
        }
    }

    /// The reason of a job failed because its worker died while its handler ran, once for
    /// each of its ``JobRetryPolicy/maxAttempts``: the job is handled, its handler not run again.
    public static let handlerFailedReason = "handlerFailed: its worker died while the handler ran, attempts spent"

    /// The reason of a job that may not be repeated (``JobSpec/isRescuable`` is false: a POST
    /// or PATCH without an idempotency key) whose transfer was interrupted, by its worker's
    /// death or by a release: it fails rather than risk being sent twice.
    public static let mayHaveBeenSentReason = "interrupted after it may have been sent"
}

/// What a completed attempt produced.
public struct JobResult: Codable, Sendable, Hashable {
    /// The HTTP status.
    public var status: Int
    /// Bytes of the response body (of the whole file, for a resumed download).
    public var bytes: Int64
    /// The final file's path relative to the worker's folder, when there is one.
    public var file: String?
    /// SHA-256 of the file, when computed.
    public var sha256: String?
    /// The body, for a small in-memory response (not for downloads).
    public var body: Data?
    /// True when nothing was transferred: the file already stood complete under its name
    /// (checked against the job's checksum, or the size the server announces); ``status`` is 0
    /// then. Nil (false) in results recorded before it was kept.
    public var alreadyThere: Bool?
    /// A result.
    public init(status: Int, bytes: Int64, file: String? = nil, sha256: String? = nil, body: Data? = nil, alreadyThere: Bool? = nil) {
        self.status = status
        self.bytes = bytes
        self.file = file
        self.sha256 = sha256
        self.body = body
        self.alreadyThere = alreadyThere
    }
}

/// Progress of a running download, recorded with the heartbeat: lets a restart check its
/// `.part` file (bytes known flushed, and the validator it was fetched with).
public struct Checkpoint: Codable, Sendable, Hashable {
    /// Bytes of the `.part` known to be on disk when the heartbeat was sent.
    public var bytes: Int64
    /// The `ETag` or `Last-Modified` the bytes were fetched with, for `If-Range`.
    public var validator: String?
    /// The machine (``WorkerInfo/localNode``) whose disk holds the `.part`.
    public var node: String
    /// The boot of `node` (Linux's `/proc/sys/kernel/random/boot_id`) in which `bytes` were
    /// flushed; nil in checkpoints recorded before it was kept. A worker on `node` that claims
    /// the job after another boot (a power loss may have left the `.part` longer than its data)
    /// truncates the `.part` to `bytes` before resuming.
    public var bootID: String?
    /// The size of the whole file as its response announced it, when it did.
    public var total: Int64?
    /// Bytes per second since the previous checkpoint of the same worker, when there was one.
    public var bytesPerSecond: Double?
    /// When it was taken, by the worker's clock.
    public var recordedAt: Date?
    /// A checkpoint.
    public init(bytes: Int64, validator: String? = nil, node: String, bootID: String? = nil,
                total: Int64? = nil, bytesPerSecond: Double? = nil, recordedAt: Date? = nil) {
        self.bytes = bytes
        self.validator = validator
        self.node = node
        self.bootID = bootID
        self.total = total
        self.bytesPerSecond = bytesPerSecond
        self.recordedAt = recordedAt
    }
}

/// A job as the store holds it: what `jobs(_:)` returns.
public struct JobRecord: Codable, Sendable, Hashable {
    /// The job's id.
    public var id: JobID
    /// The queue it was enqueued on.
    public var queue: String
    /// What was enqueued.
    public var spec: JobSpec
    /// Where it is in its life.
    public var state: JobState
    /// Claims so far.
    public var attempt: Int
    /// When it may run next (its schedule, or a retry's backoff), by the store's clock.
    public var runAt: Date
    /// When it was enqueued.
    public var createdAt: Date
    /// When it became final; pruning counts its retention from here.
    public var finalizedAt: Date?
    /// The worker holding the job (running, or final and unhandled by it), if any.
    public var worker: String?
    /// The error of the last failed attempt, or why it was cancelled.
    public var lastError: String?
    /// The recorded outcome of a final job whose worker recorded one.
    public var outcome: JobOutcome?
    /// Whether the handler returned for the final outcome (true for jobs cancelled or failed
    /// without a worker: there is no handler call for them).
    public var handled: Bool
    /// The last checkpoint of a download, kept across attempts for resuming.
    public var checkpoint: Checkpoint?
    /// A cancel asked for while it runs: its worker learns it with the next heartbeat.
    public var cancelRequested: Bool

    /// A record (made by stores, and by tests).
    public init(
        id: JobID, queue: String, spec: JobSpec, state: JobState, attempt: Int, runAt: Date, createdAt: Date,
        finalizedAt: Date? = nil, worker: String? = nil, lastError: String? = nil, outcome: JobOutcome? = nil,
        handled: Bool = false, checkpoint: Checkpoint? = nil, cancelRequested: Bool = false
    ) {
        self.id = id
        self.queue = queue
        self.spec = spec
        self.state = state
        self.attempt = attempt
        self.runAt = runAt
        self.createdAt = createdAt
        self.finalizedAt = finalizedAt
        self.worker = worker
        self.lastError = lastError
        self.outcome = outcome
        self.handled = handled
        self.checkpoint = checkpoint
        self.cancelRequested = cancelRequested
    }
}
