import CurlQueueDurable
import CurlQueuePostgres
import CurlQueueTestHelpers
import Foundation
import Testing

/// A worker's heartbeat never waits behind its own statements. It shared their connections:
/// on a loaded machine a heartbeat waited 0.8 s in a connection's queue for an 11 ms query,
/// and a busy, live worker whose heartbeat waited past its self-fence gave its jobs up (run
/// again elsewhere). Here both statement connections are held by enqueues waiting on a lock
/// another client holds, and the heartbeat is answered meanwhile.
@Suite(.enabled(if: TestPostgres.enabled, "set CQ_POSTGRES_URL (scripts/test-postgres) to run the PostgreSQL tests"))
struct PostgresHeartbeatConnectionTests {
    /// Runs `sql` through psql until it prints `expected`, every `StorePoll.interval`: the state
    /// is another client's (the server's lock table), no notification tells of it.
    func pollServer(_ url: String, _ sql: String, until expected: String) async throws -> Bool {
        try await pollStore { try TestPostgres.psql(url, sql) == expected }
    }

    @Test(.timeLimit(.minutes(2))) func aHeartbeatIsAnsweredWhileEveryStatementConnectionWaits() async throws {
        let url = try TestPostgres.freshDatabase()
        let store = try await PostgresJobStore.open(url: url)
        #expect(store.configuration.connections == 2)
        let worker = WorkerInfo(node: "heartbeat-test", pid: 1)
        try await store.register(worker)

        // Another client holds the lock that equal enqueues take in turn, for up to 60 s.
        let key = "held-\(UUID().uuidString)"
        // A client that takes the lock and holds it (pg_sleep) until the test kills it: the sleep
        // is the holding, not a wait that hopes.
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/psql")
        holder.arguments = ["-X", "-q", url,
                            "-c", "SELECT pg_advisory_lock(hashtextextended('default' || chr(10) || '\(key)', 0))",
                            "-c", "SELECT pg_sleep(60) /* heartbeat-test holder */"]
        holder.standardOutput = FileHandle.nullDevice
        holder.standardError = FileHandle.nullDevice
        try holder.run()
        defer { if holder.isRunning { holder.terminate() } }
        let thisDatabase = "datname = current_database()"
        try #require(try await pollServer(url, """
            SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
            WHERE l.locktype = 'advisory' AND l.granted AND d.\(thisDatabase)
            """, until: "1"), "the other client holds the lock")

        // Two equal enqueues: one on each statement connection, both waiting for that lock.
        let spec = JobSpec(kind: "download", request: JobRequest(url: "http://127.0.0.1:9/held"),
                           duplicates: .skipIfPending, key: key)
        let enqueued = LockedBox(0)
        let enqueues = (0..<2).map { _ in
            Task {
                defer { enqueued.update { $0 += 1 } }
                return try await store.enqueue([spec], queue: "default", order: .fifo)
            }
        }
        try #require(try await pollServer(url, """
            SELECT count(*) FROM pg_stat_activity
            WHERE \(thisDatabase) AND wait_event_type = 'Lock' AND wait_event = 'advisory'
            """, until: "2"), "both statement connections wait for the lock")

        let reply = try await store.heartbeat(worker.id, checkpoints: [:])
        #expect(reply == .alive(held: [], cancelRequested: []))
        #expect(enqueued.value == 0, "answered while both enqueues still waited")

        // The holder's session ends: the enqueues go on, one inserting, the other skipping.
        try TestPostgres.psql(url, """
            SELECT pg_terminate_backend(pid) FROM pg_stat_activity
            WHERE \(thisDatabase) AND query LIKE '%heartbeat-test holder%' AND pid <> pg_backend_pid()
            """)
        var results: [EnqueueResult] = []
        for enqueue in enqueues { results += try await enqueue.value }
        #expect(results.filter { if case .inserted = $0 { true } else { false } }.count == 1)
        holder.waitUntilExit()
        await store.close()
    }
}
