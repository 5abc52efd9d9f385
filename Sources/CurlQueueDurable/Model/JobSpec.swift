public import Foundation

/// One durable job: everything a worker needs to run it, with no closures.
///
/// The outcome goes to the handler the worker registered under ``kind``; a worker never
/// claims a kind it has no handler for. Encode it to JSON to store it; ``validated(limits:)``
/// is checked by every store's `enqueue`.
public struct JobSpec: Codable, Sendable, Hashable {
    /// The order of the jobs of one priority: strict between priorities.
    public enum Priority: Int, Codable, Sendable, Hashable, Comparable, CaseIterable {
        /// Runs when no normal or high job waits.
        case low = 0
        /// The default.
        case normal = 1
        /// Runs before every normal and low job of its queue.
        case high = 2
        public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// What `enqueue` does when a job with the same ``dedupKey`` is already in the queue.
    public enum DuplicatePolicy: String, Codable, Sendable, Hashable {
        /// The new job replaces the earlier ones, as `RequestQueue` does in memory: an equal
        /// pending job is cancelled, an equal running one is asked to cancel (its worker sees
        /// it at its next heartbeat), then the new one is added.
        case replaceEarlier
        /// Nothing is added when an equal job is pending or running; the existing id is returned.
        case skipIfPending
        /// The key is ignored: every enqueue adds a job.
        case allow
    }

    /// The name of the handler that receives the outcome, registered in the worker.
    public var kind: String
    /// The request to run.
    public var request: JobRequest
    /// Its place among the queue's waiting jobs.
    public var priority: Priority
    /// How often and when it is tried again; also bounds its handler's crashes.
    public var retry: JobRetryPolicy
    /// What enqueueing it does to equal jobs (same ``dedupKey``).
    public var duplicates: DuplicatePolicy
    /// The key that makes two jobs "equal" for ``duplicates`` and for cancel. Nil: the
    /// SHA-256 of the request (see ``dedupKey``).
    public var key: String?
    /// Sent as the `Idempotency-Key` field. A POST or PATCH whose worker died is tried again
    /// only when it has one; without, it fails as "interrupted after it may have been sent".
    public var idempotencyKey: String?
    /// The name of a credential resolved by the worker's provider when the job runs (e.g. an
    /// OAuth2 token): how a job is authorised without a secret in the store.
    public var credential: String?
    /// The earliest time to run it (nil: now).
    public var runAt: Date?
    /// The user's own data, handed back to the handler.
    public var metadata: [String: String]

    /// A job; nothing is checked until a store's `enqueue` calls ``validated(limits:)``.
    public init(
        kind: String,
        request: JobRequest,
        priority: Priority = .normal,
        retry: JobRetryPolicy = .init(),
        duplicates: DuplicatePolicy = .replaceEarlier,
        key: String? = nil,
        idempotencyKey: String? = nil,
        credential: String? = nil,
        runAt: Date? = nil,
        metadata: [String: String] = [:]
    ) {
        self.kind = kind
        self.request = request
        self.priority = priority
        self.retry = retry
        self.duplicates = duplicates
        self.key = key
        self.idempotencyKey = idempotencyKey
        self.credential = credential
        self.runAt = runAt
        self.metadata = metadata
    }
}
