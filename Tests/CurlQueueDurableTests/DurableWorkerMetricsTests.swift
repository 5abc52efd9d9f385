import CoreMetrics
import CurlQueue
import CurlQueueDurable
import CurlQueueSQLite
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import MetricsTestKit
import Testing

/// A worker made with a metrics factory in effect counts its claims, lease renewals and the
/// outcomes the store recorded (docs/observability.md).
@Suite struct DurableWorkerMetricsTests {
    @Test func claimsRenewalsAndOutcomesAreCounted() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let store = try SQLiteJobStore(path: folder.appendingPathComponent("jobs.sqlite").path)
                let specs = [
                    JobSpec(kind: "download", request: JobRequest(url: server.baseURL + "/bytes/1000")),
                    JobSpec(kind: "download", request: JobRequest(url: server.baseURL + "/bytes/2000")),
                    JobSpec(kind: "download", request: JobRequest(url: server.baseURL + "/status/404")),
                ]
                _ = try await store.enqueue(specs, queue: "mirror", order: .fifo)
                var configuration = DurableWorker.Configuration.forTests(folder.appendingPathComponent("files"))
                configuration.queue = "mirror"
                let metrics = TestMetrics()
                let worker = withMetricsFactory(metrics) {
                    DurableWorker(store: store, requestQueue: RequestQueue(maxConcurrentRequestCount: 2), configuration: configuration)
                }
                let renewals: @Sendable () -> Int64 = { metrics.counterTotal(label: "curlqueue_durable_lease_renewals_total",
                                                       dimensions: [("queue", "mirror"), ("outcome", "renewed")]) }
                let handled = Locked(0)
                worker.register(kind: "download") { [weak worker] _ in
                    guard handled.withLock({ $0 += 1; return $0 }) == 3 else { return }
                    // The stop once a heartbeat (every second here) renewed the leases. The counter is
                    // the metrics backend's, which signals nothing: it is read every 20 ms (the sleep
                    // is the poll's period) until it moves or 20 s pass.
                    let deadline = ContinuousClock.now + .seconds(20)
                    while renewals() == 0, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
                    worker?.stop(drain: .seconds(30))
                }
                try await worker.run()
                let queue = ("queue", "mirror")
                #expect(metrics.counterTotal(label: "curlqueue_durable_jobs_claimed_total", dimensions: [queue]) == 3)
                let finished = { (outcome: String) in
                    metrics.counterTotal(label: "curlqueue_durable_jobs_finished_total", dimensions: [queue, ("outcome", outcome)])
                }
                #expect(finished("completed") == 2)
                #expect(finished("failed") == 1)
                #expect(finished("retry") == 0)
                #expect(renewals() >= 1)
                #expect(metrics.counterTotal(label: "curlqueue_durable_claim_failures_total", dimensions: [queue]) == 0)
            }
        }
    }
}
