import CurlQueue
import CurlQueueDurable
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

@testable import CurlQueuePostgres

/// The server crashes (`pg_ctl -m immediate`) and comes back, three times, while two producers
/// enqueue and two `DurableWorker`s download from the fixture server: enqueues during the
/// outage fail with a clear error and are never acknowledged, the workers' connections come
/// back by themselves (with backoff), and every acknowledged job ends completed exactly once.
/// On a cluster of the test's own, so the shared server stays up for the tests beside it.
@Suite(.enabled(if: TestPostgres.enabled, "CQ_POSTGRES_URL is unset: run through scripts/test-postgres (or scripts/test) to test against PostgreSQL"))
struct PostgresRestartTests {
    /// What the producers and the workers' handlers report, and waits for it: every wait in
    /// the test is for one of these events (or the server's own).
    final class Tally: @unchecked Sendable {  // safe: `state` and `waiters` are only touched under `lock`
        struct State {
            var acknowledged: [JobID] = []
            var enqueueErrors: [String] = []
            var unclearErrors: [String] = []
            var handled: [JobID: Int] = [:]
        }
        private let lock = NSLock()
        private var state = State()
        private var waiters: [UUID: (test: (State) -> Bool, continuation: CheckedContinuation<Bool, Never>)] = [:]

        var value: State { lock.withLock { state } }

        func update(_ body: (inout State) -> Void) {
            lock.lock()
            body(&state)
            let ready = waiters.filter { $0.value.test(state) }
            for key in ready.keys { waiters[key] = nil }
            lock.unlock()
            for waiter in ready.values { waiter.continuation.resume(returning: true) }
        }

        /// At least `count` jobs handled.
        static func handled(atLeast count: Int) -> @Sendable (State) -> Bool {
            { $0.handled.count >= count }
        }

        /// At least `count` enqueues refused.
        static func refused(atLeast count: Int) -> @Sendable (State) -> Bool {
            { $0.enqueueErrors.count >= count }
        }

        /// The acknowledged jobs from the `start`th on (`limit` of them, or all) are handled.
        static func handled(acknowledgedFrom start: Int, limit: Int = .max) -> @Sendable (State) -> Bool {
            { state in
                let jobs = state.acknowledged.dropFirst(start).prefix(limit)
                return (limit == .max || jobs.count == limit) && jobs.allSatisfy { state.handled[$0] != nil }
            }
        }

        /// Fewer than `count` acknowledged jobs wait to be handled.
        static func backlog(below count: Int) -> @Sendable (State) -> Bool {
            { state in state.acknowledged.lazy.filter { state.handled[$0] == nil }.count < count }
        }

        /// Waits until `test` holds (true) or `timeout` passes (false).
        func wait(_ timeout: Duration, until test: @escaping @Sendable (State) -> Bool) async -> Bool {
            let key = UUID()
            let deadline = Task {
                try? await Task.sleep(for: timeout)  // the sleep IS the deadline
                let waiter = lock.withLock { waiters.removeValue(forKey: key) }
                waiter?.continuation.resume(returning: false)
            }
            defer { deadline.cancel() }
            return await withCheckedContinuation { continuation in
                lock.lock()
                if test(state) {
                    lock.unlock()
                    continuation.resume(returning: true)
                } else {
                    waiters[key] = (test, continuation)
                    lock.unlock()
                }
            }
        }
    }

    /// Whether every task in `tasks` ends within `timeout` (their errors ignored).
    static func ended(_ tasks: [Task<Void, any Error>], within timeout: Duration) async -> Bool {
        await withCheckedContinuation { continuation in
            let once = LockedBox<CheckedContinuation<Bool, Never>?>(continuation)
            @Sendable func resume(_ value: Bool) {
                once.update { pending in
                    defer { pending = nil }
                    return pending
                }?.resume(returning: value)
            }
            Task {
                for task in tasks { _ = try? await task.value }
                resume(true)
            }
            Task {
                try? await Task.sleep(for: timeout)  // the sleep IS the deadline
                resume(false)
            }
        }
    }

    @Test(.timeLimit(.minutes(5)))
    func immediateStopsUnderLoadLoseNothingAcknowledgedAndWorkersReconnect() async throws {
        let cluster = try await offThePool { try PrivateCluster() }
        defer { cluster.destroy() }
        try await withServer { server in
            try await withFolder { folder in
                let producer = try await PostgresJobStore.open(url: cluster.url)
                // Every change of a job's state, for "completed exactly once" (a trigger of the
                // test's own: the store has none).
                try TestPostgres.psql(cluster.url, """
                    CREATE TABLE cq_job_audit (id bigint NOT NULL, state text NOT NULL);
                    CREATE FUNCTION cq_job_audit() RETURNS trigger LANGUAGE plpgsql AS
                      $$ BEGIN INSERT INTO cq_job_audit VALUES (NEW.id, NEW.state); RETURN NULL; END $$;
                    CREATE TRIGGER cq_job_audit AFTER UPDATE OF state ON cq_job FOR EACH ROW
                      WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION cq_job_audit();
                    """)
                let tally = Tally()
                let producing = LockedBox(true)

                var workers: [DurableWorker] = []
                var runs: [Task<Void, any Error>] = []
                for index in 0..<2 {
                    let store = try await PostgresJobStore.open(url: cluster.url)
                    var configuration = DurableWorker.Configuration(folder: folder.appendingPathComponent("w\(index)"))
                    configuration.heartbeatInterval = .seconds(1)
                    configuration.pollInterval = .milliseconds(200)
                    configuration.maintenanceInterval = .seconds(1)
                    let worker = DurableWorker(store: store, requestQueue: RequestQueue(maxConcurrentRequestCount: 4),
                                               configuration: configuration)
                    worker.register(kind: "download") { job in
                        tally.update { $0.handled[job.record.id, default: 0] += 1 }
                    }
                    workers.append(worker)
                    runs.append(Task { try await worker.run() })
                }

                // Two producers, one job per transaction; an id a call returned is acknowledged.
                let producers = (0..<2).map { index in
                    Task {
                        var n = 0
                        while producing.value {
                            // The load follows the workers (a backlog of at most 12), so that a
                            // slow machine does not pile up thousands of jobs; at least one
                            // enqueue a second goes on regardless, so an outage is always seen.
                            _ = await tally.wait(.seconds(1), until: Tally.backlog(below: 12))
                            let spec = JobSpec(kind: "download", request: JobRequest(
                                url: server.baseURL + "/bytes/16384?chunk=4096&drip=25&p=\(index)&n=\(n)", destination: "p\(index)-\(n).bin"))
                            do {
                                let ids = try await producer.enqueue([spec], queue: "default", order: .fifo).map(\.id)
                                tally.update { $0.acknowledged += ids }
                                n += 1
                                try? await Task.sleep(for: .milliseconds(20))  // the sleep IS the load's rate
                            } catch {
                                let text = "\(error)"
                                let clear = (error as? PostgresStoreError)?.kind == .unavailable && text.hasPrefix("PostgreSQL unavailable: ")
                                tally.update { clear ? $0.enqueueErrors.append(text) : $0.unclearErrors.append(text) }
                                try? await Task.sleep(for: .milliseconds(50))  // the sleep IS the producer's retry backoff
                            }
                        }
                    }
                }

                // Three crashes: at a moment of steady load; soon after the server is back (the
                // lanes' backoff reset by a fresh connect); and with an outage of 6 s, which takes
                // the backoff to its 5 s cap.
                let moments: [(afterHandled: Int, extraOutage: Duration)] = [(30, .zero), (5, .zero), (30, .seconds(6))]
                // A round that fails ends the rounds: the rest would only wait out their bounds.
                rounds: for (round, moment) in moments.enumerated() {
                    let base = tally.value.handled.count
                    guard await tally.wait(.seconds(60), until: Tally.handled(atLeast: base + moment.afterHandled)) else {
                        Issue.record("round \(round): work did not flow before the crash")
                        break rounds
                    }
                    let errorsBefore = tally.value.enqueueErrors.count
                    try await offThePool { try cluster.stopImmediately() }
                    // The outage lasts until both producers have seen it.
                    guard await tally.wait(.seconds(60), until: Tally.refused(atLeast: errorsBefore + 2)) else {
                        Issue.record("round \(round): enqueues did not fail while the server was down")
                        try await offThePool { try cluster.start() }
                        break rounds
                    }
                    if moment.extraOutage > .zero { try await Task.sleep(for: moment.extraOutage) }  // the sleep IS the outage
                    let acknowledgedAtStart = tally.value.acknowledged.count
                    try await offThePool { try cluster.start() }
                    // Reconnected by themselves: jobs enqueued after the start are run and handled.
                    guard await tally.wait(.seconds(60), until: Tally.handled(acknowledgedFrom: acknowledgedAtStart, limit: 5)) else {
                        Issue.record("round \(round): no job enqueued after the restart was run within 60 s: the workers did not reconnect")
                        break rounds
                    }
                }
                producing.update { $0 = false }
                for task in producers { await task.value }
                let drained = await tally.wait(.seconds(120), until: Tally.handled(acknowledgedFrom: 0))
                #expect(drained, "every acknowledged job was handled")
                for worker in workers { worker.stop(drain: .seconds(10)) }
                // Bounded: a worker whose store never comes back cannot record what it holds.
                #expect(await Self.ended(runs, within: .seconds(60)), "the workers stopped")

                let state = tally.value
                #expect(state.unclearErrors.isEmpty, "enqueue errors other than PostgreSQL unavailable: \(state.unclearErrors.prefix(3))")
                #expect(state.enqueueErrors.count >= 6)
                let acknowledged = Set(state.acknowledged)
                #expect(acknowledged.count == state.acknowledged.count, "an id acknowledged twice")
                let rows = try TestPostgres.psql(cluster.url, "SELECT id, state, attempt FROM cq_job ORDER BY id")
                    .split(separator: "\n").map { $0.split(separator: "|").map(String.init) }
                var stored: [JobID: (state: String, attempt: Int)] = [:]
                for row in rows where row.count == 3 { stored[JobID(row[0])!] = (row[1], Int(row[2])!) }
                let lost = acknowledged.filter { stored[$0] == nil }.sorted()
                #expect(lost.isEmpty, "acknowledged enqueues lost: \(lost.prefix(10))")
                let unfinished = acknowledged.filter { stored[$0]?.state != "completed" }.sorted()
                #expect(unfinished.isEmpty, "acknowledged jobs not completed: \(unfinished.prefix(10))")
                let rescued = acknowledged.filter { (stored[$0]?.attempt ?? 1) != 1 }.sorted()
                #expect(rescued.isEmpty, "jobs run more than once (rescued by mistake): \(rescued.prefix(10))")
                let twice = try TestPostgres.psql(cluster.url, """
                    SELECT count(*) FROM (SELECT id FROM cq_job_audit WHERE state = 'completed' GROUP BY id HAVING count(*) > 1) t
                    """)
                #expect(twice == "0", "jobs completed more than once")
                let completions = try TestPostgres.psql(cluster.url, "SELECT count(*) FROM cq_job_audit WHERE state = 'completed'")
                #expect(Int(completions) ?? 0 >= acknowledged.count)
                print("PostgresRestartTests: \(acknowledged.count) acknowledged, \(stored.count) stored, \(state.enqueueErrors.count) enqueues refused during 3 outages, handlers run \(state.handled.values.reduce(0, +)) times")
                for worker in workers { await (worker.store as? PostgresJobStore)?.close() }
                await producer.close()
            }
        }
    }
}
