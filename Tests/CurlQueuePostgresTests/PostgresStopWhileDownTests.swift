import CurlQueue
import CurlQueueDurable
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

@testable import CurlQueuePostgres

/// Issue 23: a worker told to stop while its PostgreSQL is down still stops, within the drain
/// deadline plus its store grace, and loses nothing: the job it could not record stays leased,
/// and once the server is back another worker rescues and completes it, once.
/// On a cluster of the test's own, so the shared server stays up for the tests beside it.
@Suite(.enabled(if: TestPostgres.enabled, "CQ_POSTGRES_URL is unset: run through scripts/test-postgres (or scripts/test) to test against PostgreSQL"))
struct PostgresStopWhileDownTests {
    @Test(.timeLimit(.minutes(3)))
    func aWorkerStoppedWhileTheServerIsDownStopsWithinTheGraceAndTheJobCompletesOnceLater() async throws {
        let cluster = try await offThePool { try PrivateCluster() }
        defer { cluster.destroy() }
        try await withServer { server in
            try await withFolder { folder in
                var storeConfiguration = PostgresJobStore.Configuration()
                storeConfiguration.workerTTL = 3  // the rescue after the outage comes soon
                let producer = try await PostgresJobStore.open(url: cluster.url, configuration: storeConfiguration)
                try TestPostgres.psql(cluster.url, """
                    CREATE TABLE cq_job_audit (id bigint NOT NULL, state text NOT NULL);
                    CREATE FUNCTION cq_job_audit() RETURNS trigger LANGUAGE plpgsql AS
                      $$ BEGIN INSERT INTO cq_job_audit VALUES (NEW.id, NEW.state); RETURN NULL; END $$;
                    CREATE TRIGGER cq_job_audit AFTER UPDATE OF state ON cq_job FOR EACH ROW
                      WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION cq_job_audit();
                    """)
                let gate = "stop-down-\(UUID().uuidString.prefix(8))"
                let spec = JobSpec(kind: "download", request: JobRequest(url: server.baseURL + "/gate/\(gate)", destination: "one.bin"))
                let id = try #require(try await producer.enqueue([spec], queue: "default", order: .fifo).first?.id)
                let handled = LockedBox<[String: Int]>([:])
                let tally = PostgresRestartTests.Tally()

                func worker(_ name: String) async throws -> DurableWorker {
                    var configuration = DurableWorker.Configuration(folder: folder)
                    configuration.heartbeatInterval = .seconds(1)
                    configuration.pollInterval = .milliseconds(200)
                    configuration.maintenanceInterval = .seconds(1)
                    // Far past the bound below: only the store grace can end the stop in time.
                    configuration.selfFence = .seconds(40)
                    configuration.storeGrace = .seconds(2)
                    let store = try await PostgresJobStore.open(url: cluster.url, configuration: storeConfiguration)
                    let worker = DurableWorker(store: store, requestQueue: RequestQueue(maxConcurrentRequestCount: 2), configuration: configuration)
                    worker.register(kind: "download") { job in
                        handled.update { $0[name, default: 0] += 1 }
                        tally.update { $0.handled[job.record.id, default: 0] += 1 }
                    }
                    return worker
                }

                let first = try await worker("first")
                let firstRun = Task { try await first.run() }
                try await server.waitForRequests(pathPrefix: "/gate/\(gate)", count: 1)
                // The server crashes while the download runs; then the download finishes: its
                // outcome cannot be recorded.
                try await offThePool { try cluster.stopImmediately() }
                server.openGate(gate)
                let drain = Duration.seconds(2)
                let stopAsked = ContinuousClock.now
                first.stop(drain: drain)
                // Drain 2 s + grace 2 s, with room for a loaded machine; without the grace the
                // stop waits for the 40 s self-fence.
                let stopped = await PostgresRestartTests.ended([firstRun], within: .seconds(14))
                #expect(stopped, "stop(drain:) returned within the drain deadline plus the store grace")
                _ = try? await firstRun.value
                print("PostgresStopWhileDownTests: stop returned after \(ContinuousClock.now - stopAsked) with the server down")
                #expect(first.jobsLeftLeased == [id], "the job it could not record is named")
                #expect(handled.value["first"] == nil, "no handler without a recorded outcome")
                await (first.store as? PostgresJobStore)?.close()

                // The server comes back: another worker rescues the job (its worker is past the
                // TTL) and completes it.
                try await offThePool { try cluster.start() }
                let second = try await worker("second")
                let secondRun = Task { try await second.run() }
                let completed = await tally.wait(.seconds(90), until: PostgresRestartTests.Tally.handled(atLeast: 1))
                #expect(completed, "the job was completed by the second worker")
                second.stop(drain: .seconds(5))
                #expect(await PostgresRestartTests.ended([secondRun], within: .seconds(30)), "the second worker stopped")
                #expect(second.jobsLeftLeased.isEmpty)
                #expect(try TestPostgres.psql(cluster.url, "SELECT state FROM cq_job WHERE id = \(id)") == "completed")
                #expect(try TestPostgres.psql(cluster.url, "SELECT count(*) FROM cq_job_audit WHERE id = \(id) AND state = 'completed'") == "1",
                        "completed exactly once in the store's record")
                #expect(handled.value == ["second": 1], "one handler run")
                await (second.store as? PostgresJobStore)?.close()
                await producer.close()
            }
        }
    }

    /// A job still running when the server goes away and the worker is stopped: its release
    /// cannot reach the store, so the stop ends at the drain plus the grace naming it in
    /// `jobsLeftLeased` (as the daemon then says on standard error), not as if it were given back.
    @Test(.timeLimit(.minutes(2)))
    func aRunningJobWhoseReleaseCannotBeMadeIsNamed() async throws {
        let cluster = try await offThePool { try PrivateCluster() }
        defer { cluster.destroy() }
        try await withServer { server in
            try await withFolder { folder in
                let store = try await PostgresJobStore.open(url: cluster.url)
                let gate = "release-down-\(UUID().uuidString.prefix(8))"
                let spec = JobSpec(kind: "download", request: JobRequest(url: server.baseURL + "/gate/\(gate)", destination: "one.bin"))
                let id = try #require(try await store.enqueue([spec], queue: "default", order: .fifo).first?.id)
                var configuration = DurableWorker.Configuration(folder: folder)
                configuration.heartbeatInterval = .seconds(1)
                configuration.pollInterval = .milliseconds(200)
                configuration.selfFence = .seconds(40)
                configuration.storeGrace = .seconds(2)
                let worker = DurableWorker(store: store, requestQueue: RequestQueue(maxConcurrentRequestCount: 1), configuration: configuration)
                worker.register(kind: "download") { _ in }
                let run = Task { try await worker.run() }
                try await server.waitForRequests(pathPrefix: "/gate/\(gate)", count: 1)
                try await offThePool { try cluster.stopImmediately() }
                worker.stop(drain: .milliseconds(200))
                let stopped = await PostgresRestartTests.ended([run], within: .seconds(14))
                #expect(stopped, "stopped within the drain plus the grace")
                _ = try? await run.value
                #expect(worker.jobsLeftLeased == [id], "the job whose release was never made is named")
                server.openGate(gate)
                await store.close()
            }
        }
    }
}

