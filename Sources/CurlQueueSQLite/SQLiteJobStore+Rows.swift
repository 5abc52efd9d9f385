import CSQLite
import CurlQueueDurable
import Foundation

/// A `cq_job` row as the store reads it: its columns by name (``columns``, in any order), so a
/// statement that selects them in another order reads the same job, and one that misses a
/// column throws an ``SQLiteError`` naming it and the statement.
struct SQLiteJobRow {
    /// What every statement that reads jobs selects or returns.
    static let columns = """
        id, queue, spec, state, attempt, run_at, created_at, finalized_at, lease_owner, last_error, outcome, handled,
        checkpoint, cancel_requested, lease_token, priority, order_key
        """

    let record: JobRecord
    /// The fencing token of the job's current lease.
    let leaseToken: Int64
    /// The claim order: priority (high first), then the order key.
    let priority: Int64
    let orderKey: Int64

    init(_ row: SQLiteRow, decoder: JSONDecoder) throws(SQLiteError) {
        let stateName = try row.decode("state", as: String.self)
        guard let state = JobState(rawValue: stateName) else {
            throw SQLiteError(code: SQLITE_MISMATCH, message: "the column \"state\" holds \"\(stateName)\", not a JobState", sql: row.columns.sql)
        }
        guard let spec = try row.decodeJSON("spec", as: JobSpec.self, with: decoder) else {
            throw SQLiteError(code: SQLITE_MISMATCH, message: "the column \"spec\" holds NULL, not a JobSpec", sql: row.columns.sql)
        }
        record = JobRecord(
            id: try row.decode("id"), queue: try row.decode("queue"), spec: spec, state: state,
            attempt: try row.decode("attempt"),
            runAt: Self.date(try row.decode("run_at")), createdAt: Self.date(try row.decode("created_at")),
            finalizedAt: try row.decode("finalized_at", as: Int64?.self).map(Self.date),
            worker: try row.decode("lease_owner"), lastError: try row.decode("last_error"),
            outcome: try row.decodeJSON("outcome", as: JobOutcome.self, with: decoder),
            handled: try row.decode("handled"),
            checkpoint: try row.decodeJSON("checkpoint", as: Checkpoint.self, with: decoder),
            cancelRequested: try row.decode("cancel_requested"))
        leaseToken = try row.decode("lease_token")
        priority = try row.decode("priority")
        orderKey = try row.decode("order_key")
    }

    /// Unix milliseconds as a date.
    static func date(_ milliseconds: Int64) -> Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }
}
