public import CurlQueueDurable
public import Foundation
import CurlQueue

/// The job store on one SQLite file: the default, with no server to run.
///
/// - **Durability.** WAL journal; `synchronous = FULL` by default, so an `enqueue` or a
///   `finish` that returned survives `kill -9` *and* power loss. ``Options/synchronousNormal``
///   trades the last commits before a power loss (never a `kill -9`) for fewer fsyncs.
/// - **Concurrency.** Each store object has one connection, used from one serial queue; any
///   number of processes may open the same file. Writes are `BEGIN IMMEDIATE` transactions
///   (the write lock taken at the start) and wait up to ``Options/busyTimeout`` for another
///   writer, so claims are serialized and never overlap.
/// - **Dead workers.** A worker on this machine holds a `flock` on a lock file beside the
///   database for its life: `maintain()` rescues a dead process's jobs at once (the kernel
///   drops the lock of a killed process). A worker whose lock cannot be checked is judged by
///   its TTL: no heartbeat for ``Options/workerTTL``.
/// - **Files.** The database, its `-wal` and `-shm` files and the lock folder are created
///   0600/0700. Not for network filesystems (WAL needs shared memory on one machine).
public final class SQLiteJobStore: JobStore, @unchecked Sendable {
    // @unchecked Sendable: `connection` and `locks` are touched only on `queue`, a serial
    // DispatchQueue; `wakers` is a Locked; the other properties are immutable.

    /// Settings of a store.
    public struct Options: Sendable {
        /// How long a write waits for the write lock held by another connection (another process,
        /// or another store object). 30 s: SQLite's busy handler is not fair, so under many
        /// writers one may wait several of the others' transactions.
        public var busyTimeout: Duration = .seconds(30)
        /// A worker with no heartbeat for this long is dead (the fallback to its lock). 60 s.
        public var workerTTL: Duration = .seconds(60)
        /// Final, handled jobs are removed by `maintain()` this long after they ended. 7 days.
        public var retention: Duration = .seconds(7 * 24 * 3600)
        /// `synchronous = NORMAL` instead of FULL: survives a crash of the process, may lose
        /// the last commits on power loss.
        public var synchronousNormal = false
        /// Checks at enqueue.
        public var limits = JobSpec.Limits()
        /// The clock (tests move it); Unix time.
        public var now: @Sendable () -> Date = { Date() }
        /// The defaults.
        public init() {}
    }

    /// The database file.
    public let path: String
    private let options: Options
    private let queue = DispatchQueue(label: "CurlQueueSQLite.store")
    private let connection: SQLiteConnection
    private let workerLocks: WorkerLocks
    private var heldLocks: [String: Int32] = [:]
    private let wakers = Locked<[String: [UUID: AsyncStream<Void>.Continuation]]>([:])
    private let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }()
    private let decoder = JSONDecoder()

    /// Opens the store at `path`, creating the file (0600) and its schema when needed. Two
    /// processes opening an empty file at once create the schema once (under an exclusive
    /// transaction). Throws ``SQLiteError`` when the file cannot be opened or written (a
    /// read-only or full disk: nothing is half-written).
    public init(path: String, options: Options = .init()) throws {
        self.path = path
        self.options = options
        let timeout = Int32(clamping: Int64(options.busyTimeout.components.seconds * 1000))
        connection = try SQLiteConnection(path: path, busyTimeoutMilliseconds: max(timeout, 1))
        workerLocks = WorkerLocks(databasePath: path)
        try Self.prepare(connection, options: options)
    }

    private static func prepare(_ connection: SQLiteConnection, options: Options) throws {
        try refuseForeignDatabase(connection)
        // journal_mode=WAL needs a moment alone with the file, and SQLite does not call the busy
        // handler for it: try again a bounded number of times while another process holds it.
        var attempt = 0
        while true {
            let result = Result { () throws(SQLiteError) in try connection.execute("PRAGMA journal_mode = WAL") }
            guard case .failure(let error) = result else { break }
            guard error.isBusy, attempt < 200 else { throw error }
            attempt += 1
            usleep(10_000)  // the wait IS the retry: another process holds the file for a moment
        }
        try connection.execute("PRAGMA synchronous = \(options.synchronousNormal ? "NORMAL" : "FULL")")
        try connection.execute("PRAGMA foreign_keys = ON")
        guard try userVersion(connection) < SQLiteSchema.version else { return }
        try connection.transaction("BEGIN EXCLUSIVE") {
            let version = try userVersion(connection)
            guard version < SQLiteSchema.version else { return }
            if version < 1 { try connection.execute(SQLiteSchema.create) }
            for upgrade in SQLiteSchema.upgrades where upgrade.version > max(version, 1) {
                try connection.execute(upgrade.sql)
            }
            try connection.execute("PRAGMA user_version = \(SQLiteSchema.version)")
        }
    }

    private static func userVersion(_ connection: SQLiteConnection) throws -> Int64 {
        try connection.query("PRAGMA user_version").first?.decode("user_version", as: Int64.self) ?? 0
    }

    /// Throws, changing nothing, when the file holds tables of another application and none
    /// of a store: its tables are never mixed with a database that is not a store's.
    private static func refuseForeignDatabase(_ connection: SQLiteConnection) throws {
        let tables = try connection.query(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")
            .map { try $0.decode("name", as: String.self) }
        guard !tables.isEmpty, !tables.contains("cq_job") else { return }
        let shown = tables.sorted().prefix(5).joined(separator: ", ") + (tables.count > 5 ? ", …" : "")
        throw SQLiteError(code: 1, message: "not a curlq job store: the database holds other tables (\(shown)); nothing was changed")
    }

    deinit {
        for (worker, descriptor) in heldLocks { workerLocks.release(worker, descriptor: descriptor) }
    }

    // MARK: - Running on the queue

    private func run<T: Sendable>(_ body: @escaping @Sendable (SQLiteJobStore) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async {
                continuation.resume(with: Result { try body(self) })
            }
        }
    }

    private var nowMilliseconds: Int64 { Self.milliseconds(options.now()) }
    private static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }
    private static func date(_ milliseconds: Int64) -> Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }

    private func wake(_ queueName: String) {
        let continuations = wakers.withLock { Array(($0[queueName] ?? [:]).values) }
        for continuation in continuations { continuation.yield() }
    }

    // MARK: - JobStore

    public func enqueue(_ specs: [JobSpec], queue queueName: String, order: JobOrder) async throws -> [EnqueueResult] {
        let limits = options.limits
        try JobSpecError.checkQueueName(queueName)
        for spec in specs { _ = try spec.validated(limits: limits) }
        let encoded = try specs.map { try encoder.encode($0) }
        let results = try await run { store in
            try store.connection.transaction {
                try zip(specs, encoded).map { spec, json in
                    try store.insert(spec, json: json, queue: queueName, order: order)
                }
            }
        }
        wake(queueName)
        return results
    }

    private func insert(_ spec: JobSpec, json: Data, queue queueName: String, order: JobOrder) throws -> EnqueueResult {
        let key = spec.dedupKey
        let now = nowMilliseconds
        var replaced: [JobID] = []
        switch spec.duplicates {
        case .skipIfPending:
            if let existing = try connection.query(
                "SELECT id FROM cq_job WHERE queue = ? AND dedup_key = ? AND state IN ('available','scheduled','running') ORDER BY id DESC LIMIT 1",
                [.text(queueName), .text(key)]
            ).first?.decode("id", as: JobID.self) {
                return .skipped(existing: existing)
            }
        case .replaceEarlier:
            let pending = try connection.query(
                """
                UPDATE cq_job SET state = 'cancelled', finalized_at = ?, handled = 1, last_error = 'replaced by a newer equal job'
                WHERE queue = ? AND dedup_key = ? AND state IN ('available','scheduled') RETURNING id
                """, [.integer(now), .text(queueName), .text(key)])
            let running = try connection.query(
                "UPDATE cq_job SET cancel_requested = 1 WHERE queue = ? AND dedup_key = ? AND state = 'running' RETURNING id",
                [.text(queueName), .text(key)])
            replaced = try (pending + running).map { try $0.decode("id", as: JobID.self) }.sorted()
        case .allow:
            break
        }
        let runAt = spec.runAt.map(Self.milliseconds) ?? now
        let rows = try connection.query(
            """
            INSERT INTO cq_job (queue, kind, state, priority, order_key, run_at, max_attempts, dedup_key, unique_key,
                                rescuable, spec, created_at)
            VALUES (?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?) RETURNING id
            """,
            [
                .text(queueName), .text(spec.kind), .text(runAt > now ? "scheduled" : "available"),
                .integer(Int64(spec.priority.rawValue)), .integer(runAt), .integer(Int64(spec.retry.maxAttempts)),
                .text(key), spec.duplicates == .allow ? .null : .text(key), .integer(spec.isRescuable ? 1 : 0),
                .blob(json), .integer(now),
            ])
        guard let id = try rows.first?.decode("id", as: JobID.self) else { throw SQLiteError(code: 1, message: "insert returned no id") }
        try connection.query("UPDATE cq_job SET order_key = ? WHERE id = ?", [.integer(order == .fifo ? id : -id), .integer(id)])
        return .inserted(id, replaced: replaced)
    }

    public func register(_ worker: WorkerInfo) async throws {
        try await run { store in
            // Registering again (a worker declared dead comes back) keeps the lock it holds.
            let descriptor = try store.heldLocks[worker.id] ?? store.workerLocks.acquire(worker.id)
            do {
                let now = store.nowMilliseconds
                try store.connection.query(
                    "INSERT OR REPLACE INTO cq_worker (id, node, pid, started_at, expires_at) VALUES (?, ?, ?, ?, ?)",
                    [.text(worker.id), .text(worker.node), .integer(Int64(worker.pid)), .integer(now),
                     .integer(now + store.ttlMilliseconds)])
            } catch {
                store.workerLocks.release(worker.id, descriptor: descriptor)
                throw error
            }
            store.heldLocks[worker.id] = descriptor
        }
    }

    private var ttlMilliseconds: Int64 {
        let components = options.workerTTL.components
        return components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }

    public func claim(queue queueName: String, kinds: Set<String>, limit: Int, worker: WorkerInfo.ID) async throws -> [ClaimedJob] {
        guard limit > 0, !kinds.isEmpty else { return [] }
        let kindsJSON = String(decoding: try encoder.encode(kinds.sorted()), as: UTF8.self)
        return try await run { store in
            try store.connection.transaction {
                try store.claimLocked(queueName, kinds: kindsJSON, limit: limit, worker: worker)
            }
        }
    }

    private static let recordColumns = SQLiteJobRow.columns

    private func claimLocked(_ queueName: String, kinds: String, limit: Int, worker: String) throws -> [ClaimedJob] {
        let now = nowMilliseconds
        guard try connection.query("SELECT 1 FROM cq_worker WHERE id = ?", [.text(worker)]).first != nil else {
            throw SQLiteError(code: 1, message: "worker \(worker) is not registered (or was declared dead)")
        }
        try connection.query(
            "UPDATE cq_job SET state = 'available' WHERE state = 'scheduled' AND run_at <= ?", [.integer(now)])
        var claimed: [ClaimedJob] = []
        let handlerRows = try connection.query(
            """
            UPDATE cq_job SET lease_owner = ?, lease_token = lease_token + 1
            WHERE id IN (SELECT id FROM cq_job WHERE queue = ? AND handled = 0 AND finalized_at IS NOT NULL
                         AND lease_owner IS NULL AND kind IN (SELECT value FROM json_each(?)) ORDER BY id LIMIT ?)
            RETURNING \(Self.recordColumns)
            """, [.text(worker), .text(queueName), .text(kinds), .integer(Int64(limit))])
        for row in try handlerRows.map(jobRow).sorted(by: { $0.record.id < $1.record.id }) {
            let record = row.record
            claimed.append(ClaimedJob(lease: Lease(job: record.id, token: row.leaseToken), record: record,
                                      recorded: record.outcome ?? .failed(reason: record.lastError ?? "failed")))
        }
        let paused = try connection.query("SELECT paused FROM cq_queue WHERE name = ?", [.text(queueName)])
            .first?.decode("paused", as: Bool.self) == true
        let remaining = limit - claimed.count
        guard !paused, remaining > 0 else { return claimed }
        let rows = try connection.query(
            """
            UPDATE cq_job SET state = 'running', attempt = attempt + 1, lease_owner = ?, lease_token = lease_token + 1,
                              cancel_requested = 0
            WHERE id IN (SELECT id FROM cq_job WHERE queue = ? AND state = 'available'
                         AND kind IN (SELECT value FROM json_each(?)) ORDER BY priority DESC, order_key LIMIT ?)
            RETURNING \(Self.recordColumns)
            """, [.text(worker), .text(queueName), .text(kinds), .integer(Int64(remaining))])
        let ordered = try rows.map(jobRow).sorted { ($0.priority, -$0.orderKey) > ($1.priority, -$1.orderKey) }
        for row in ordered {
            claimed.append(ClaimedJob(lease: Lease(job: row.record.id, token: row.leaseToken), record: row.record))
        }
        return claimed
    }

    private func jobRow(_ row: SQLiteRow) throws -> SQLiteJobRow { try SQLiteJobRow(row, decoder: decoder) }

    public func heartbeat(_ worker: WorkerInfo.ID, checkpoints: [JobID: Checkpoint]) async throws -> HeartbeatReply {
        let encodedCheckpoints = try checkpoints.mapValues { try encoder.encode($0) }
        return try await run { store in
            try store.connection.transaction {
                let now = store.nowMilliseconds
                try store.connection.query(
                    "UPDATE cq_worker SET expires_at = ? WHERE id = ?", [.integer(now + store.ttlMilliseconds), .text(worker)])
                guard store.connection.changes == 1 else { return .declaredDead }
                for (job, checkpoint) in encodedCheckpoints {
                    try store.connection.query(
                        "UPDATE cq_job SET checkpoint = ? WHERE id = ? AND lease_owner = ? AND state = 'running'",
                        [.blob(checkpoint), .integer(job), .text(worker)])
                }
                let rows = try store.connection.query(
                    "SELECT id, cancel_requested, state FROM cq_job WHERE lease_owner = ?", [.text(worker)])
                var held = Set<JobID>(), cancel = Set<JobID>()
                for row in rows {
                    let id = try row.decode("id", as: JobID.self)
                    held.insert(id)
                    if try row.decode("cancel_requested", as: Bool.self), try row.decode("state", as: String.self) == "running" {
                        cancel.insert(id)
                    }
                }
                return .alive(held: held, cancelRequested: cancel)
            }
        }
    }

    public func finish(_ lease: Lease, _ outcome: JobOutcome) async throws -> Bool {
        let json = try encoder.encode(outcome)
        let (recorded, queueName) = try await run { store in
            try store.connection.transaction { () throws -> (Bool, String?) in
                let now = store.nowMilliseconds
                let fence: [SQLiteValue] = [.integer(lease.job), .integer(lease.token)]
                let fenced = "WHERE id = ? AND lease_token = ? AND state = 'running' RETURNING queue"
                let rows: [SQLiteRow]
                switch outcome {
                case .completed:
                    rows = try store.connection.query(
                        "UPDATE cq_job SET state = 'completed', outcome = ?, finalized_at = ?, last_error = NULL \(fenced)",
                        [.blob(json), .integer(now)] + fence)
                case .failed(let reason, _), .cancelled(let reason):
                    let state = if case .failed = outcome { "failed" } else { "cancelled" }
                    rows = try store.connection.query(
                        "UPDATE cq_job SET state = ?, outcome = ?, finalized_at = ?, last_error = ? \(fenced)",
                        [.text(state), .blob(json), .integer(now), .text(reason)] + fence)
                case .retry(let reason, let at, let kind):
                    let runAt = Self.milliseconds(at)
                    let failed = try store.encoder.encode(JobOutcome.failed(reason: reason, kind: kind))
                    rows = try store.connection.query(
                        """
                        UPDATE cq_job SET
                          state = CASE WHEN attempt >= max_attempts THEN 'failed' WHEN ? <= ? THEN 'available' ELSE 'scheduled' END,
                          run_at = ?, last_error = ?,
                          outcome = CASE WHEN attempt >= max_attempts THEN ? ELSE NULL END,
                          finalized_at = CASE WHEN attempt >= max_attempts THEN ? ELSE NULL END,
                          lease_owner = CASE WHEN attempt >= max_attempts THEN lease_owner ELSE NULL END
                        \(fenced)
                        """,
                        [.integer(runAt), .integer(now), .integer(runAt), .text(reason), .blob(failed), .integer(now)] + fence)
                }
                return (!rows.isEmpty, try rows.first?.decode("queue", as: String.self))
            }
        }
        if let queueName, case .retry = outcome { wake(queueName) }
        return recorded
    }

    public func markHandled(_ lease: Lease) async throws -> Bool {
        try await run { store in
            try store.connection.query(
                """
                UPDATE cq_job SET handled = 1, lease_owner = NULL
                WHERE id = ? AND lease_token = ? AND finalized_at IS NOT NULL AND handled = 0 AND lease_owner IS NOT NULL
                """, [.integer(lease.job), .integer(lease.token)])
            return store.connection.changes == 1
        }
    }

    public func release(_ leases: [Lease]) async throws {
        guard !leases.isEmpty else { return }
        let queues = try await run { store in
            try store.connection.transaction {
                var queues = Set<String>()
                let now = store.nowMilliseconds
                let notRepeatable = try store.encoder.encode(JobOutcome.failed(reason: JobOutcome.mayHaveBeenSentReason))
                for lease in leases {
                    // A job that may not be repeated (a POST without an idempotency key) fails
                    // rather than risk a second send, as the rescue does.
                    let rows = try store.connection.query(
                        """
                        UPDATE cq_job SET state = CASE WHEN rescuable = 1 THEN 'available' ELSE 'failed' END,
                                          attempt = CASE WHEN rescuable = 1 THEN max(attempt - 1, 0) ELSE attempt END,
                                          finalized_at = CASE WHEN rescuable = 1 THEN finalized_at ELSE ? END,
                                          outcome = CASE WHEN rescuable = 1 THEN outcome ELSE ? END,
                                          last_error = CASE WHEN rescuable = 1 THEN last_error ELSE ? END,
                                          lease_owner = NULL, cancel_requested = 0
                        WHERE id = ? AND lease_token = ? AND state = 'running' RETURNING queue
                        """, [.integer(now), .blob(notRepeatable), .text(JobOutcome.mayHaveBeenSentReason),
                              .integer(lease.job), .integer(lease.token)])
                    queues.formUnion(try rows.map { try $0.decode("queue", as: String.self) })
                    let handlerRows = try store.connection.query(
                        """
                        UPDATE cq_job SET lease_owner = NULL
                        WHERE id = ? AND lease_token = ? AND finalized_at IS NOT NULL AND handled = 0 RETURNING queue
                        """, [.integer(lease.job), .integer(lease.token)])
                    queues.formUnion(try handlerRows.map { try $0.decode("queue", as: String.self) })
                }
                return queues
            }
        }
        for queueName in queues { wake(queueName) }
    }

    /// The reason recorded for a job whose handler's worker died `max_attempts` times.
    static let handlerFailed = JobOutcome.handlerFailedReason

    public func release(_ jobs: Set<JobID>, heldBy worker: WorkerInfo.ID) async throws {
        guard !jobs.isEmpty else { return }
        let queues = try await run { store in
            try store.connection.transaction {
                var queues = Set<String>()
                for job in jobs.sorted() {
                    let rows = try store.connection.query(
                        """
                        UPDATE cq_job SET state = CASE WHEN state = 'running' THEN 'available' ELSE state END,
                                          attempt = CASE WHEN state = 'running' THEN max(attempt - 1, 0) ELSE attempt END,
                                          lease_owner = NULL, cancel_requested = 0
                        WHERE id = ? AND lease_owner = ? RETURNING queue
                        """, [.integer(job), .text(worker)])
                    queues.formUnion(try rows.map { try $0.decode("queue", as: String.self) })
                }
                return queues
            }
        }
        for queueName in queues { wake(queueName) }
    }

    public func unregister(_ worker: WorkerInfo.ID) async throws {
        let queues = try await run { store in
            let queues = try store.connection.transaction { () throws -> Set<String> in
                var report = MaintenanceReport()
                return try store.rescue(worker, report: &report)
            }
            if let descriptor = store.heldLocks.removeValue(forKey: worker) {
                store.workerLocks.release(worker, descriptor: descriptor)
            }
            return queues
        }
        for queueName in queues { wake(queueName) }
    }

    /// Gives up a dead (or unregistered) worker's jobs and removes it. Returns the queues with
    /// new work.
    private func rescue(_ worker: String, report: inout MaintenanceReport) throws -> Set<String> {
        let now = nowMilliseconds
        let owner: [SQLiteValue] = [.text(worker)]
        let failed = try encoder.encode(JobOutcome.failed(reason: "interrupted: its worker died"))
        let notRepeatable = try encoder.encode(JobOutcome.failed(reason: "interrupted after it may have been sent"))
        // Spent or not repeatable: failed, and their handler is still to run (by another worker).
        let failedRows = try connection.query(
            """
            UPDATE cq_job SET state = 'failed', finalized_at = ?, lease_owner = NULL,
              outcome = CASE WHEN rescuable = 1 THEN ? ELSE ? END,
              last_error = CASE WHEN rescuable = 1 THEN 'interrupted: its worker died, no attempts left'
                                ELSE 'interrupted after it may have been sent' END
            WHERE lease_owner = ? AND state = 'running' AND (attempt >= max_attempts OR rescuable = 0)
            RETURNING queue
            """, [.integer(now), .blob(failed), .blob(notRepeatable)] + owner)
        let rescued = try connection.query(
            """
            UPDATE cq_job SET state = 'available', lease_owner = NULL, last_error = 'interrupted: its worker died'
            WHERE lease_owner = ? AND state = 'running' RETURNING queue
            """, owner)
        // A recorded outcome whose handler was running: its worker died in the handler (or
        // before it). Each such rescue counts; at the attempt budget the job is failed and
        // handled, so a handler that kills its worker every time is not run for ever.
        let handlerFailed = try encoder.encode(JobOutcome.failed(reason: Self.handlerFailed))
        let handlers = try connection.query(
            """
            UPDATE cq_job SET lease_owner = NULL, handler_failures = handler_failures + 1,
              state = CASE WHEN handler_failures + 1 >= max_attempts THEN 'failed' ELSE state END,
              handled = CASE WHEN handler_failures + 1 >= max_attempts THEN 1 ELSE handled END,
              outcome = CASE WHEN handler_failures + 1 >= max_attempts THEN ? ELSE outcome END,
              last_error = CASE WHEN handler_failures + 1 >= max_attempts THEN ? ELSE last_error END
            WHERE lease_owner = ? AND finalized_at IS NOT NULL RETURNING queue, handled
            """, [.blob(handlerFailed), .text(Self.handlerFailed)] + owner)
        report.handlerFailed += try handlers.filter { try $0.decode("handled", as: Bool.self) }.count
        try connection.query("DELETE FROM cq_worker WHERE id = ?", owner)
        report.rescued += rescued.count
        report.failed += failedRows.count
        return Set(try (failedRows + rescued + handlers).map { try $0.decode("queue", as: String.self) })
    }

    public func cancel(_ selector: JobSelector) async throws -> CancelResult {
        try await run { store in
            try store.connection.transaction {
                let now = store.nowMilliseconds
                let (condition, arguments): (String, [SQLiteValue]) =
                    switch selector {
                    case .id(let id): ("id = ?", [.integer(id)])
                    case .key(let key, let queueName): ("queue = ? AND dedup_key = ?", [.text(queueName), .text(key)])
                    case .queue(let queueName): ("queue = ?", [.text(queueName)])
                    }
                let cancelled = try store.connection.query(
                    """
                    UPDATE cq_job SET state = 'cancelled', finalized_at = ?, handled = 1, last_error = 'cancelled'
                    WHERE \(condition) AND state IN ('available','scheduled') RETURNING id
                    """, [.integer(now)] + arguments)
                let requested = try store.connection.query(
                    "UPDATE cq_job SET cancel_requested = 1 WHERE \(condition) AND state = 'running' RETURNING id", arguments)
                return CancelResult(cancelled: try cancelled.map { try $0.decode("id", as: JobID.self) }.sorted(),
                                    requested: try requested.map { try $0.decode("id", as: JobID.self) }.sorted())
            }
        }
    }

    public func setPaused(_ paused: Bool, queue queueName: String) async throws {
        try await run { store in
            _ = try store.connection.query(
                "INSERT INTO cq_queue (name, paused) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET paused = excluded.paused",
                [.text(queueName), .integer(paused ? 1 : 0)])
        }
        if !paused { wake(queueName) }
    }

    public func removeFinished(_ ids: Set<JobID>?, queue queueName: String) async throws -> [JobID] {
        var sql = "DELETE FROM cq_job WHERE queue = ? AND finalized_at IS NOT NULL AND handled = 1"
        var arguments: [SQLiteValue] = [.text(queueName)]
        if let ids {
            sql += " AND id IN (SELECT value FROM json_each(?))"
            arguments.append(.text(String(decoding: try encoder.encode(ids.sorted()), as: UTF8.self)))
        }
        let (statement, values) = (sql + " RETURNING id", arguments)
        return try await run { store in
            try store.connection.query(statement, values).map { try $0.decode("id", as: JobID.self) }.sorted()
        }
    }

    public func jobs(_ filter: JobFilter) async throws -> [JobRecord] {
        var conditions: [String] = []
        var arguments: [SQLiteValue] = []
        if let queueName = filter.queue {
            conditions.append("queue = ?")
            arguments.append(.text(queueName))
        }
        if let states = filter.states {
            conditions.append("state IN (SELECT value FROM json_each(?))")
            arguments.append(.text(String(decoding: try encoder.encode(states.map(\.rawValue).sorted()), as: UTF8.self)))
        }
        if let ids = filter.ids {
            conditions.append("id IN (SELECT value FROM json_each(?))")
            arguments.append(.text(String(decoding: try encoder.encode(ids.sorted()), as: UTF8.self)))
        }
        let whereClause = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
        let sql = "SELECT \(Self.recordColumns) FROM cq_job \(whereClause) ORDER BY id DESC LIMIT ?"
        let finalArguments = arguments + [.integer(Int64(max(0, filter.limit)))]
        return try await run { store in
            try store.connection.query(sql, finalArguments).map { try store.jobRow($0).record }
        }
    }

    public func counts(queue queueName: String?) async throws -> [JobState: Int] {
        try await run { store in
            let rows =
                if let queueName {
                    try store.connection.query("SELECT state, count(*) AS count FROM cq_job WHERE queue = ? GROUP BY state", [.text(queueName)])
                } else {
                    try store.connection.query("SELECT state, count(*) AS count FROM cq_job GROUP BY state")
                }
            var counts: [JobState: Int] = [:]
            for row in rows {
                if let state = JobState(rawValue: try row.decode("state")) { counts[state] = try row.decode("count") }
            }
            return counts
        }
    }

    public func health(queue queueName: String) async throws -> StoreHealth {
        try await run { store in
            let now = store.nowMilliseconds
            let row = try store.connection.query(
                """
                SELECT (SELECT min(run_at) FROM cq_job WHERE queue = ? AND state = 'available') AS oldest_available,
                       (SELECT count(*) FROM cq_worker WHERE expires_at > ?) AS workers_alive
                """, [.text(queueName), .integer(now)]).first
            return StoreHealth(
                oldestAvailableSince: try row?.decode("oldest_available", as: Int64?.self).map(Self.date),
                workersAlive: try row?.decode("workers_alive", as: Int.self) ?? 0, now: Self.date(now))
        }
    }

    public func maintain() async throws -> MaintenanceReport {
        let node = WorkerInfo.localNode
        let retention = options.retention.components.seconds * 1000
        let (report, queues) = try await run { store in
            // Lock checks are file operations: done before the transaction, decided inside it.
            let workers = try store.connection.query("SELECT id, node, expires_at FROM cq_worker")
            var lockDead = Set<String>()
            var lockAlive = Set<String>()
            for row in workers {
                let id = try row.decode("id", as: String.self)
                guard try row.decode("node", as: String.self) == node, store.heldLocks[id] == nil else { continue }
                switch store.workerLocks.isDead(id) {
                case true?: lockDead.insert(id)
                case false?: lockAlive.insert(id)
                case nil: break
                }
            }
            return try store.connection.transaction { () throws -> (MaintenanceReport, Set<String>) in
                var report = MaintenanceReport()
                var queues = Set<String>()
                let now = store.nowMilliseconds
                report.promoted = try store.connection.query(
                    "UPDATE cq_job SET state = 'available' WHERE state = 'scheduled' AND run_at <= ? RETURNING queue",
                    [.integer(now)]
                ).count
                let expired = try store.connection.query(
                    "SELECT id FROM cq_worker WHERE expires_at < ?", [.integer(now)]
                ).map { try $0.decode("id", as: String.self) }
                let dead = lockDead.union(expired.filter { !lockAlive.contains($0) && store.heldLocks[$0] == nil })
                for worker in dead.sorted() {
                    queues.formUnion(try store.rescue(worker, report: &report))
                    report.deadWorkers.append(worker)
                }
                report.pruned = try store.connection.query(
                    "DELETE FROM cq_job WHERE handled = 1 AND finalized_at < ? RETURNING id", [.integer(now - retention)]
                ).count
                return (report, queues)
            }
        }
        for queueName in queues { wake(queueName) }
        return report
    }

    public func wakeups(queue queueName: String) -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        wakers.withLock { $0[queueName, default: [:]][id] = continuation }
        continuation.onTermination = { [wakers] _ in
            _ = wakers.withLock { $0[queueName]?.removeValue(forKey: id) }
        }
        return stream
    }
}
