internal import CurlQueueDurable
internal import Foundation

/// A `cq_job` row as the store reads it: the columns of `SQL.columns()` by name, in any order,
/// so a statement that selects them in another order reads the same job, and one that misses a
/// column throws a ``PostgresStoreError`` naming it and the statement.
struct PostgresJobRow {
    let record: JobRecord
    /// The fencing token of the job's current lease (none once released or rescued).
    let leaseToken: Int64

    init(_ row: PGRow) throws(PostgresStoreError) {
        func date(_ seconds: Double) -> Date { Date(timeIntervalSince1970: seconds) }
        let stateName = try row.decode("state", as: String.self)
        guard let state = JobState(rawValue: stateName) else {
            throw PostgresStoreError(kind: .server, message: "the column \"state\" holds \"\(stateName)\", not a JobState",
                                     sql: row.columns.sql)
        }
        guard let spec = try row.decodeJSON("spec", as: JobSpec.self) else {
            throw PostgresStoreError(kind: .server, message: "the column \"spec\" holds NULL, not a JobSpec", sql: row.columns.sql)
        }
        record = JobRecord(
            id: try row.decode("id"), queue: try row.decode("queue"), spec: spec, state: state,
            attempt: try row.decode("attempt"),
            runAt: date(try row.decode("run_at")), createdAt: date(try row.decode("created_at")),
            finalizedAt: try row.decode("finalized_at", as: Double?.self).map(date),
            worker: try row.decode("lease_owner"), lastError: try row.decode("last_error"),
            outcome: try row.decodeJSON("outcome", as: JobOutcome.self), handled: try row.decode("handled"),
            checkpoint: try row.decodeJSON("checkpoint", as: Checkpoint.self),
            cancelRequested: try row.decode("cancel_requested"))
        leaseToken = try row.decode("lease_token", as: Int64?.self) ?? 0
    }
}
