import CurlQueue
import CurlQueueDurable
import CurlQueueDurableTestSupport
import Foundation
import Testing

@testable import CurlQueuePostgres

/// A fresh database on the shared server, the stores opened on it, and a way to let time pass:
/// every lease, retry and retention time is the database's `now()`, so time passes by moving
/// the stored times back.
final class PostgresHarness: Sendable {
    let url: String
    let ttl: Duration
    let retention: Duration
    private let opened = Locked<[PostgresJobStore]>([])

    init(ttl: Duration = .seconds(60), retention: Duration = .seconds(3600)) throws {
        url = try TestPostgres.freshDatabase()
        self.ttl = ttl
        self.retention = retention
    }

    func open() async throws -> PostgresJobStore {
        var configuration = PostgresJobStore.Configuration()
        configuration.workerTTL = Double(ttl.components.seconds)
        configuration.completedRetention = Double(retention.components.seconds)
        configuration.failedRetention = Double(retention.components.seconds)
        configuration.connections = 1
        let store = try await PostgresJobStore.open(url: url, configuration: configuration)
        opened.withLock { $0.append(store) }
        return store
    }

    func advance(_ duration: Duration) throws {
        let interval = "interval '\(duration.components.seconds) seconds'"
        try TestPostgres.psql(url, """
            UPDATE cq_worker SET expires_at = expires_at - \(interval), heartbeat_at = heartbeat_at - \(interval);
            UPDATE cq_job SET run_at = run_at - \(interval), created_at = created_at - \(interval),
                              finalized_at = finalized_at - \(interval), attempted_at = attempted_at - \(interval);
            """)
    }

    var storeHarness: StoreHarness {
        StoreHarness(open: { try await self.open() }, advance: { try self.advance($0) }, workerTTL: ttl, retention: retention)
    }

    func closeAll() async {
        for store in opened.withLock({ $0 }) { await store.close() }
    }
}

/// The JobStore contract (the conformance suite every store runs) and PostgreSQL's own
/// cases, against a real PostgreSQL 15.
@Suite(.enabled(if: TestPostgres.enabled, "CQ_POSTGRES_URL is unset: run through scripts/test-postgres (or scripts/test) to test against PostgreSQL"))
struct PostgresStoreTests {
    static func spec(_ path: String, maxAttempts: Int = 3) -> JobSpec {
        JobSpec(kind: "download", request: JobRequest(url: "http://127.0.0.1:9/\(path)", destination: path),
                retry: JobRetryPolicy(maxAttempts: maxAttempts))
    }

    @Test(arguments: StoreConformance.cases)
    func conformance(_ name: String) async throws {
        let harness = try PostgresHarness()
        try await StoreConformance.run(name) { harness.storeHarness }
        await harness.closeAll()
    }

    @Test func concurrentStartersCreateTheSchemaOnce() async throws {
        let harness = try PostgresHarness()
        // Eight daemons start at once on the empty database, each on a connection of its own.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 { group.addTask { _ = try await harness.open() } }
            try await group.waitForAll()
        }
        #expect(try TestPostgres.psql(harness.url, "SELECT string_agg(version::text, ',' ORDER BY version) FROM cq_migration") == "1,2")
        #expect(try TestPostgres.psql(harness.url, "SELECT count(*) FROM pg_class WHERE relname = 'cq_job'") == "1")
        await harness.closeAll()
    }

    @Test func aPausedWorkerThatLostItsLeaseRecordsNothing() async throws {
        let harness = try PostgresHarness()
        let store = try await harness.open()
        let id = try await store.enqueue([Self.spec("a")], queue: "q", order: .fifo)[0].id
        let paused = WorkerInfo(node: "a", pid: 1), other = WorkerInfo(node: "b", pid: 2)
        try await store.register(paused)
        let stale = try #require(try await store.claim(queue: "q", kinds: ["download"], limit: 1, worker: paused.id).first)
        // The paused worker sends no heartbeat past its TTL (by the database's clock).
        try harness.advance(harness.ttl + .seconds(1))
        try await store.register(other)
        #expect(try await store.maintain().rescued == 1)
        let fresh = try #require(try await store.claim(queue: "q", kinds: ["download"], limit: 1, worker: other.id).first)
        #expect(fresh.lease.job == id && fresh.lease.token != stale.lease.token && fresh.record.attempt == 2)
        // It wakes up: its heartbeat says it is dead, and none of its writes lands.
        #expect(try await store.heartbeat(paused.id, checkpoints: [id: Checkpoint(bytes: 9, node: "a")]) == .declaredDead)
        #expect(try await store.finish(stale.lease, .completed(JobResult(status: 200, bytes: 1))) == false)
        #expect(try await store.finish(stale.lease, .retry(reason: "x", at: Date())) == false)
        #expect(try await store.markHandled(stale.lease) == false)
        try await store.release([stale.lease])
        #expect(try await store.heartbeat(other.id, checkpoints: [:]) == .alive(held: [id], cancelRequested: []))
        #expect(try await store.finish(fresh.lease, .completed(JobResult(status: 200, bytes: 2))))
        let record = try #require(try await store.jobs(JobFilter(ids: [id])).first)
        #expect(record.outcome == .completed(JobResult(status: 200, bytes: 2)) && record.checkpoint == nil)
        await harness.closeAll()
    }

    @Test func wakeupsComeFromEnqueuesOnAnotherConnection() async throws {
        let harness = try PostgresHarness()
        let listening = try await harness.open()
        let producer = try await harness.open()
        let wakeups = listening.wakeups(queue: "q")
        // The listener connects on its own thread: enqueue until a wakeup arrives (the first
        // NOTIFY may come before its LISTEN), at most 100 times.
        let got = try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                for n in 0..<100 {
                    _ = try await producer.enqueue([Self.spec("w\(n)")], queue: "q", order: .fifo)
                    try await Task.sleep(for: .milliseconds(100))  // the pace of the producer, not a wait for an event
                }
                return false
            }
            group.addTask {
                var iterator = wakeups.makeAsyncIterator()
                return await iterator.next() != nil
            }
            let first = try await group.next() ?? false
            group.cancelAll()
            return first
        }
        #expect(got)
        await harness.closeAll()
    }

    @Test func unavailableServerFailsClearlyAndChangesNothing() async throws {
        // Port 9 of 127.0.0.1: nothing listens there, the connect is refused at once.
        await #expect(throws: PostgresStoreError.self) {
            _ = try await PostgresJobStore.open(url: "postgres://cq@127.0.0.1:9/postgres")
        }
    }
}
