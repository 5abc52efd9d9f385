public import CurlQueueDurable
internal import CurlQueue
internal import Foundation

/// A `JobStore` in a PostgreSQL database (15 or later), shared by any number of workers on
/// any number of machines.
///
/// - Claims never overlap: one statement with `FOR NO KEY UPDATE SKIP LOCKED`.
/// - Liveness is a lease per worker, renewed by `heartbeat`, timed by the database's `now()`
///   only: the workers' clocks never decide whether a lease expired. A worker whose lease
///   expired stays dead (its heartbeat answers `.declaredDead`), and `maintain()`, which every
///   worker runs, rescues what it held.
/// - Every write about a claimed job carries its fencing token (`Lease.token`, from a sequence):
///   a worker that lost its lease records nothing.
/// - Connections: `Configuration.connections` for statements, plus one that LISTENs once
///   `wakeups(queue:)` is called. A lost connection is opened again by the next call, with
///   backoff; a call made while the server is away throws `PostgresStoreError` (`.unavailable`)
///   and changed nothing, or, when the connection broke during the call, may have committed:
///   `finish`, `markHandled` and `release` may be called again with the same lease, and report
///   the earlier commit as theirs.
///
/// Create it with ``open(url:configuration:)``, which creates the tables on first use (once,
/// however many daemons start at the same moment). Call ``close()`` when done.
public final class PostgresJobStore: JobStore {
    /// How a store behaves; the same for every worker of one database is best.
    public struct Configuration: Sendable {
        /// Connections for statements (each used by one call at a time). Heartbeats have one
        /// more of their own, and wakeups another (``listens``).
        public var connections: Int = 2
        /// A worker whose last heartbeat is older than this is dead: its jobs are rescued.
        public var workerTTL: Double = 60
        /// How long completed and cancelled (handled) jobs are kept.
        public var completedRetention: Double = 86_400
        /// How long failed (handled) jobs are kept.
        public var failedRetention: Double = 7 * 86_400
        /// LISTEN for wakeups (turn off behind PgBouncer in transaction mode: workers then poll).
        public var listens: Bool = true
        /// What `enqueue` accepts (``JobSpec/validated(limits:)``).
        public var limits: JobSpec.Limits = .init()
        /// The defaults.
        public init() {}
    }

    /// Its settings, fixed when opened.
    public let configuration: Configuration
    private let url: String
    private let lanes: [PGLane]
    /// Heartbeats only: on a lane of the statements a heartbeat waited behind the worker's
    /// own claims and finishes (0.8 s seen on a loaded machine, for a 11 ms query), and past
    /// its self-fence a busy, live worker gave up its jobs.
    private let heartbeatLane: PGLane
    private let next = Locked(0)
    private let wakeupHub = WakeupHub()
    private let listener = Locked<PGListener?>(nil)
    /// Fenced writes whose connection broke: they may have committed (see `fenced`).
    private let uncertain = Locked<Set<String>>([])

    /// Connects, and creates the schema when the database has none.
    /// - Parameter url: `postgres://user[:password]@host[:port]/database[?options]`, or libpq's
    ///   `key=value` form.
    ///   A malformed one throws `PostgresStoreError` `.invalidURL`, an unreachable server `.unavailable`.
    public static func open(url: String, configuration: Configuration = .init()) async throws -> PostgresJobStore {
        try PGConnection.validate(conninfo: url)
        let store = PostgresJobStore(url: url, configuration: configuration)
        do {
            try await store.lane.run { (connection) throws(PostgresStoreError) in try Schema.migrate(connection) }
        } catch {
            await store.close()
            throw error
        }
        return store
    }

    private init(url: String, configuration: Configuration) {
        self.url = url
        self.configuration = configuration
        self.lanes = (0..<max(1, configuration.connections)).map { PGLane(conninfo: url, label: "CurlQueuePostgres.lane\($0)") }
        self.heartbeatLane = PGLane(conninfo: url, label: "CurlQueuePostgres.heartbeat")
    }

    deinit {
        listener.withLock { $0 }?.stop()
    }

    /// Closes the connections and stops listening; `wakeups` streams end.
    public func close() async {
        let listening = listener.withLock { value in
            defer { value = nil }
            return value
        }
        listening?.stop()
        wakeupHub.finishAll()
        for lane in lanes { await lane.close() }
        await heartbeatLane.close()
    }

    private var lane: PGLane {
        let index = next.withLock { value in
            defer { value &+= 1 }
            return value
        }
        return lanes[index % lanes.count]
    }

    // MARK: - Enqueue

    public func enqueue(_ specs: [JobSpec], queue: String, order: JobOrder) async throws -> [EnqueueResult] {
        let limits = configuration.limits
        try JobSpecError.checkQueueName(queue)
        let rows: [(spec: JobSpec, json: String)] = try specs.map { spec in
            let checked = try spec.validated(limits: limits)
            return (checked, try Self.encode(checked))
        }
        guard !rows.isEmpty else { return [] }
        let sign = order == .lifo ? "-1" : "1"
        return try await lane.transaction { (connection) throws(PostgresStoreError) -> [EnqueueResult] in
            var results: [EnqueueResult] = []
            var inserted = false
            for (spec, json) in rows {
                let key = spec.dedupKey
                var replaced: [JobID] = []
                if spec.duplicates != .allow {
                    try connection.query(SQL.lockKey, [queue, key])
                    if spec.duplicates == .skipIfPending,
                        let existing = try connection.query(SQL.existing, [queue, key]).first?.decode("id", as: JobID.self) {
                        results.append(.skipped(existing: existing))
                        continue
                    }
                    if spec.duplicates == .replaceEarlier {
                        replaced = try connection.query(SQL.cancel, [queue, key, nil, "replaced by a newer equal job"])
                            .map { (row) throws(PostgresStoreError) in try row.decode("id", as: JobID.self) }.sorted()
                    }
                }
                let delay = spec.runAt.map { String($0.timeIntervalSinceNow) }
                let insertedRows = try connection.query(SQL.insert, [
                    queue, spec.kind, String(spec.priority.rawValue), sign, String(max(1, spec.retry.maxAttempts)),
                    key, json, delay, spec.isRescuable ? "true" : "false",
                ])
                guard let id = try insertedRows.first?.decode("id", as: JobID.self) else {
                    throw PostgresStoreError(kind: .server, message: "the insert returned no id", sql: SQL.insert)
                }
                results.append(.inserted(id, replaced: replaced))
                inserted = true
            }
            if inserted { try connection.query(SQL.notify, [queue]) }
            return results
        }
    }

    // MARK: - Workers

    public func register(_ worker: WorkerInfo) async throws {
        let ttl = String(configuration.workerTTL)
        try await lane.run { (connection) throws(PostgresStoreError) in
            _ = try connection.query(SQL.registerWorker, [worker.id, worker.node, String(worker.pid), ttl])
        }
    }

    public func claim(queue: String, kinds: Set<String>, limit: Int, worker: WorkerInfo.ID) async throws -> [ClaimedJob] {
        guard limit > 0, !kinds.isEmpty else { return [] }
        let kindList = PGArray.text(kinds.sorted())
        let rows = try await lane.transaction { (connection) throws(PostgresStoreError) -> [PGRow] in
            _ = try connection.query(SQL.promote, [queue])
            var rows = try connection.query(SQL.claimUnhandled, [queue, kindList, String(limit), worker])
            if rows.count < limit {
                rows += try connection.query(SQL.claim, [queue, kindList, String(limit - rows.count), worker])
            }
            return rows
        }
        let claimed = try rows.map { row in
            let job = try PostgresJobRow(row)
            let record = job.record
            return (job: ClaimedJob(lease: Lease(job: record.id, token: job.leaseToken), record: record,
                                    recorded: record.state.isFinal ? record.outcome : nil),
                    orderKey: try row.decode("order_key", as: Int64.self))
        }
        // UPDATE … RETURNING has no order: the claim's is restored here. Handler jobs first,
        // then priority (high first), then the order key.
        return claimed.sorted { (a: (job: ClaimedJob, orderKey: Int64), b: (job: ClaimedJob, orderKey: Int64)) -> Bool in
            let ra: Bool = a.job.recorded != nil
            let rb: Bool = b.job.recorded != nil
            if ra != rb { return ra }
            let pa: Int = a.job.record.spec.priority.rawValue
            let pb: Int = b.job.record.spec.priority.rawValue
            if pa != pb { return pa > pb }
            return a.orderKey < b.orderKey
        }
        .map(\.job)
    }

    public func heartbeat(_ worker: WorkerInfo.ID, checkpoints: [JobID: Checkpoint]) async throws -> HeartbeatReply {
        let ids = PGArray.text(checkpoints.keys.map { String($0) })
        let values = PGArray.text(try checkpoints.values.map { try Self.encode($0) })
        let ttl = String(configuration.workerTTL)
        let row = try await heartbeatLane.run { (connection) throws(PostgresStoreError) -> PGRow? in
            try connection.query(SQL.heartbeat, [worker, ttl, ids, values]).first
        }
        guard let row, try row.decode("alive", as: Int.self) == 1 else { return .declaredDead }
        return .alive(held: Set(PGArray.int64(try row.decode("held", as: String?.self))),
                      cancelRequested: Set(PGArray.int64(try row.decode("cancel_requested", as: String?.self))))
    }

    public func finish(_ lease: Lease, _ outcome: JobOutcome) async throws -> Bool {
        let json = try Self.encode(outcome)
        let id = String(lease.job), token = String(lease.token)
        let statement: String, parameters: [String?]
        switch outcome {
        case .completed:
            (statement, parameters) = (SQL.finish, [id, token, "completed", json, nil])
        case .failed(let reason, _):
            (statement, parameters) = (SQL.finish, [id, token, "failed", json, Self.lastError(reason)])
        case .cancelled(let reason):
            (statement, parameters) = (SQL.finish, [id, token, "cancelled", json, Self.lastError(reason)])
        case .retry(let reason, let at, let kind):
            // The date becomes a delay from the database's now(): the worker's clock only
            // measures the backoff, it never places it.
            let failed = try Self.encode(JobOutcome.failed(reason: reason, kind: kind))
            (statement, parameters) = (SQL.retry, [id, token, Self.lastError(reason), String(at.timeIntervalSinceNow), failed])
        }
        return try await fenced(statement, parameters, check: SQL.wroteWithToken, id: id, token: token)
    }

    public func markHandled(_ lease: Lease) async throws -> Bool {
        try await fenced(SQL.markHandled, [String(lease.job), String(lease.token)], check: SQL.handledWithToken,
                         id: String(lease.job), token: String(lease.token))
    }

    /// A fenced write. A write whose connection broke may have committed before the reply was
    /// lost; the caller, told `.unavailable`, calls again with the same lease. So after such an
    /// error the store remembers the write, and when the retry matches no row, `check` asks
    /// whether this token's own earlier write is what moved the job on: then it reports true.
    /// Without an error in between, a second write with the same lease reports false.
    private func fenced(_ statement: String, _ parameters: [String?], check: String, id: String, token: String) async throws -> Bool {
        let key = "\(check == SQL.handledWithToken ? "handled" : "finish"):\(id):\(token)"
        let retried = uncertain.withLock { $0.contains(key) }
        let outcome = await lane.result { (connection) throws(PostgresStoreError) -> Bool in
            if try !connection.query(statement, parameters).isEmpty { return true }
            guard retried else { return false }
            return try connection.query(check, [id, token]).first?.decode("moved_on", as: Bool.self) == true
        }
        switch outcome {
        case .success(let written):
            if retried { uncertain.withLock { _ = $0.remove(key) } }
            return written
        case .failure(let error):
            if error.kind == .unavailable { uncertain.withLock { _ = $0.insert(key) } }
            throw error
        }
    }

    public func release(_ leases: [Lease]) async throws {
        guard !leases.isEmpty else { return }
        let ids = PGArray.text(leases.map { String($0.job) }), tokens = PGArray.text(leases.map { String($0.token) })
        try await lane.transaction { (connection) throws(PostgresStoreError) in
            let queues = Set(try connection.query(SQL.release, [ids, tokens, Self.rescueOutcomes.notRepeatable, JobOutcome.mayHaveBeenSentReason])
                .map { (row) throws(PostgresStoreError) in try row.decode("queue", as: String.self) })
            for queue in queues { try connection.query(SQL.notify, [queue]) }
        }
    }

    public func release(_ jobs: Set<JobID>, heldBy worker: WorkerInfo.ID) async throws {
        guard !jobs.isEmpty else { return }
        let ids = PGArray.text(jobs.sorted().map { String($0) })
        try await lane.transaction { (connection) throws(PostgresStoreError) in
            let queues = Set(try connection.query(SQL.releaseHeld, [ids, worker])
                .map { (row) throws(PostgresStoreError) in try row.decode("queue", as: String.self) })
            for queue in queues { try connection.query(SQL.notify, [queue]) }
        }
    }

    public func unregister(_ worker: WorkerInfo.ID) async throws {
        try await lane.transaction { (connection) throws(PostgresStoreError) in
            try connection.query(SQL.expireWorker, [worker])
            _ = try Self.rescue(connection)
            try connection.query(SQL.deleteWorker, [worker])
        }
    }

    // MARK: - Control and status

    public func cancel(_ selector: JobSelector) async throws -> CancelResult {
        let parameters: [String?]
        switch selector {
        case .id(let id): parameters = [nil, nil, String(id), "cancelled"]
        case .key(let key, let queue): parameters = [queue, key, nil, "cancelled"]
        case .queue(let queue): parameters = [queue, nil, nil, "cancelled"]
        }
        let rows = try await lane.run { (connection) throws(PostgresStoreError) -> [PGRow] in
            try connection.query(SQL.cancel, parameters)
        }
        var result = CancelResult()
        for row in rows {
            let id = try row.decode("id", as: JobID.self)
            if try row.decode("result", as: String.self) == "cancelled" { result.cancelled.append(id) } else { result.requested.append(id) }
        }
        result.cancelled.sort()
        result.requested.sort()
        return result
    }

    public func setPaused(_ paused: Bool, queue: String) async throws {
        try await lane.transaction { (connection) throws(PostgresStoreError) in
            try connection.query(SQL.setPaused, [paused ? "true" : "false", queue])
            if !paused { try connection.query(SQL.notify, [queue]) }
        }
    }

    public func removeFinished(_ ids: Set<JobID>?, queue: String) async throws -> [JobID] {
        let parameters: [String?] = [queue, ids.map { PGArray.text($0.map { String($0) }) }]
        let rows = try await lane.run { (connection) throws(PostgresStoreError) -> [PGRow] in
            try connection.query(SQL.removeFinished, parameters)
        }
        return try rows.map { try $0.decode("id", as: JobID.self) }.sorted()
    }

    public func jobs(_ filter: JobFilter) async throws -> [JobRecord] {
        let parameters: [String?] = [
            filter.queue, filter.states.map { PGArray.text($0.map(\.rawValue).sorted()) },
            filter.ids.map { PGArray.text($0.map { String($0) }) }, String(max(0, filter.limit)),
        ]
        let rows = try await lane.run { (connection) throws(PostgresStoreError) -> [PGRow] in
            try connection.query(SQL.jobs, parameters)
        }
        return try rows.map { try PostgresJobRow($0).record }
    }

    public func counts(queue: String?) async throws -> [JobState: Int] {
        let rows = try await lane.run { (connection) throws(PostgresStoreError) -> [PGRow] in
            try connection.query(SQL.counts, [queue])
        }
        var counts: [JobState: Int] = [:]
        for row in rows {
            if let state = JobState(rawValue: try row.decode("state")) { counts[state] = try row.decode("count") }
        }
        return counts
    }

    public func health(queue: String) async throws -> StoreHealth {
        let rows = try await lane.run { (connection) throws(PostgresStoreError) -> [PGRow] in
            try connection.query(SQL.health, [queue])
        }
        func date(_ milliseconds: Int64) -> Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }
        guard let row = rows.first else {
            throw PostgresStoreError(kind: .server, message: "the health query returned no row", sql: SQL.health)
        }
        return StoreHealth(
            oldestAvailableSince: try row.decode("oldest_available", as: Int64?.self).map(date),
            workersAlive: try row.decode("workers_alive"), now: date(try row.decode("now")))
    }

    // MARK: - Maintenance

    /// Promotion, rescue and pruning: safe in every worker at once (`SKIP LOCKED` and the state
    /// guards), so no leader is elected. Pruning runs in one worker at a time (a try-lock).
    public func maintain() async throws -> MaintenanceReport {
        let retention = [String(configuration.completedRetention), String(configuration.failedRetention)]
        return try await lane.run { (connection) throws(PostgresStoreError) -> MaintenanceReport in
            var report = MaintenanceReport()
            let promoted = try connection.query(SQL.promote, [nil])
                .map { (row) throws(PostgresStoreError) in try row.decode("queue", as: String.self) }
            report.promoted = promoted.count
            let rescue = try Self.rescue(connection)
            report.rescued = rescue.rescued
            report.failed = rescue.failed
            report.handlerFailed = rescue.handlerFailed
            report.deadWorkers = rescue.deadWorkers
            for queue in Set(promoted + rescue.queues) { try connection.query(SQL.notify, [queue]) }
            if try connection.query("SELECT pg_try_advisory_lock(hashtext('curlqueue.prune')) AS locked").first?
                .decode("locked", as: Bool.self) == true {
                defer { _ = try? connection.query("SELECT pg_advisory_unlock(hashtext('curlqueue.prune'))") }
                report.pruned = try connection.query(SQL.prune, retention).count
                try connection.query(SQL.pruneWorkers)
            }
            return report
        }
    }

    /// The outcomes the rescue records for a job it fails (the same words as the SQLite store).
    private static let rescueOutcomes = (
        spent: (try? encode(JobOutcome.failed(reason: "interrupted: its worker died"))) ?? "",
        notRepeatable: (try? encode(JobOutcome.failed(reason: JobOutcome.mayHaveBeenSentReason))) ?? "",
        handlerFailed: (try? encode(JobOutcome.failed(reason: JobOutcome.handlerFailedReason))) ?? ""
    )

    private static func rescue(_ connection: PGConnection) throws(PostgresStoreError)
        -> (rescued: Int, failed: Int, handlerFailed: Int, deadWorkers: [String], queues: [String]) {
        let rows = try connection.query(SQL.rescue, [rescueOutcomes.spent, rescueOutcomes.notRepeatable,
                                                     rescueOutcomes.handlerFailed, JobOutcome.handlerFailedReason])
        var result = (rescued: 0, failed: 0, handlerFailed: 0, deadWorkers: Set<String>(), queues: [String]())
        for row in rows {
            if try row.decode("state_before", as: String.self) == "running" {
                switch try row.decode("state_after", as: String.self) {
                case "available": result.rescued += 1
                case "failed": result.failed += 1
                default: break
                }
            }
            if try row.decode("handler_spent", as: Bool.self) { result.handlerFailed += 1 }
            result.deadWorkers.insert(try row.decode("lease_owner"))
            result.queues.append(try row.decode("queue"))
        }
        return (result.rescued, result.failed, result.handlerFailed, result.deadWorkers.sorted(), result.queues)
    }

    // MARK: - Wakeups

    /// NOTIFY on `cq_insert` with the queue's name, from enqueue, release, resume, promotion
    /// and rescue; one LISTEN connection per store, started by the first call. Best-effort: a
    /// notification sent while the connection was away is lost, so the stream also yields once
    /// after each reconnect, and workers poll.
    public func wakeups(queue: String) -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        wakeupHub.add(continuation, queue: queue)
        if configuration.listens {
            listener.withLock { value in
                guard value == nil else { return }
                let hub = wakeupHub
                let started = PGListener(conninfo: url, channels: ["cq_insert"],
                                         onNotify: { _, payload in hub.wake(queue: payload) },
                                         onReconnect: { hub.wakeAll() })
                started.start()
                value = started
            }
        }
        return stream
    }

    // MARK: - Rows

    private static func encode<T: Encodable>(_ value: T) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    /// A reason as the `last_error` column keeps it: a NUL character, which PostgreSQL's text
    /// cannot hold, becomes U+FFFD there (the outcome, JSON, keeps the reason exactly).
    static func lastError(_ reason: String) -> String {
        reason.utf8.contains(0) ? reason.replacingOccurrences(of: "\0", with: "\u{FFFD}") : reason
    }
}

/// The `wakeups` streams of one store, by queue.
final class WakeupHub: Sendable {
    private let streams = Locked<[String: [UUID: AsyncStream<Void>.Continuation]]>([:])

    func add(_ continuation: AsyncStream<Void>.Continuation, queue: String) {
        let id = UUID()
        streams.withLock { $0[queue, default: [:]][id] = continuation }
        continuation.onTermination = { [weak self] _ in
            self?.streams.withLock { _ = $0[queue]?.removeValue(forKey: id) }
        }
    }

    func wake(queue: String) {
        for continuation in streams.withLock({ Array(($0[queue] ?? [:]).values) }) { continuation.yield() }
    }

    func wakeAll() {
        for continuation in streams.withLock({ $0.values.flatMap(\.values) }) { continuation.yield() }
    }

    func finishAll() {
        for continuation in streams.withLock({ $0.values.flatMap(\.values) }) { continuation.finish() }
    }
}

/// PostgreSQL's text form of arrays, for parameters and results.
enum PGArray {
    /// `{"a","b"}` with `"` and `\` escaped.
    static func text(_ values: [String]) -> String {
        var out = "{"
        for (index, value) in values.enumerated() {
            if index > 0 { out.append(",") }
            out.append("\"")
            for character in value {
                if character == "\"" || character == "\\" { out.append("\\") }
                out.append(character)
            }
            out.append("\"")
        }
        out.append("}")
        return out
    }

    /// `{1,2,3}` → [1, 2, 3].
    static func int64(_ text: String?) -> [Int64] {
        guard let text, text.count > 2 else { return [] }
        return text.dropFirst().dropLast().split(separator: ",").compactMap { Int64($0) }
    }
}
