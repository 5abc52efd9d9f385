public import CurlQueue
public import Foundation

/// What a handler receives: a job whose outcome was recorded in the store.
///
/// A handler runs **at least once** per recorded outcome, after the outcome was committed
/// (so the store already says completed, failed or cancelled when it runs). It may run more
/// than once: when its worker dies or stops past the drain deadline before the handler
/// returned, another worker (or this one after a restart) runs it again with the recorded
/// outcome and no ``response``. So a handler must be idempotent. It runs on no particular
/// thread, never on the engine thread, and no lock is held while it runs; errors it throws are
/// ignored (the job counts as handled).
public struct DurableJob: Sendable {
    /// The job as claimed.
    public var record: JobRecord
    /// The recorded outcome.
    public var outcome: JobOutcome
    /// The response, when this worker ran the transfer (nil when the handler runs again from
    /// the store's record, or when the transfer failed).
    public var response: Response?
    /// Where the downloaded file is, for a completed job with a destination.
    public var fileURL: URL?
}

/// A handler for the jobs of one kind.
public typealias DurableJobHandler = @Sendable (DurableJob) async throws -> Void

/// Resolves a job's ``JobSpec/credential`` into header fields when the job starts, on the
/// worker: secrets never go to the store. Throwing fails the attempt (it is retried while
/// attempts remain).
public typealias CredentialProvider = @Sendable (_ credential: String, _ job: JobRecord) async throws -> [JobRequest.Field]
