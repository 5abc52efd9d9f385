import CoreMetrics
import CurlQueueDurable
import Prometheus

/// The daemon's metrics in Prometheus' text exposition format (version 0.0.4), for the
/// daemon's HTTP server to answer `GET /metrics` with (`Content-Type: text/plain;
/// version=0.0.4`). Not a listener: it renders text.
///
/// What it holds: every swift-metrics instrument made through ``factory`` — the queues' and
/// the durable worker's metrics (docs/observability.md), once ``bootstrap()`` made it the
/// process's factory before they were made — and, at each ``text(store:queue:)``, the store's
/// job counts by state, asked of the store then (not one worker's memory).
///
/// Safe from any thread. Its label sets are bounded: the library labels by queue name, status
/// class, outcome, error type and retry reason, never by URL.
final class MetricsExposition: Sendable {
    /// The registry the text is rendered from.
    let registry: PrometheusCollectorRegistry
    /// swift-metrics' factory onto ``registry``.
    let factory: PrometheusMetricsFactory

    init() {
        registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        // Transfers on a LAN or the internet: 1 ms to 1 min.
        factory.defaultDurationHistogramBuckets = [
            .milliseconds(1), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
            .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5),
            .seconds(10), .seconds(30), .seconds(60),
        ]
        self.factory = factory
    }

    /// Makes ``factory`` the process's swift-metrics factory. Call once per process, before
    /// any `RequestQueue` or `DurableWorker` is made: those made before record nothing.
    func bootstrap() {
        MetricsSystem.bootstrap(factory)
    }

    /// The exposition of every metric in ``registry``.
    func text() -> String {
        registry.emitToString()
    }

    // Computed: `MetricNameDescriptor` is not Sendable, so it cannot be a stored static.
    private static var storeUp: MetricNameDescriptor {
        MetricNameDescriptor(
            metricName: "curlqueue_durable_store_up", unitName: "",
            helpText: "Whether the job store answered the last count of its jobs (1) or not (0).")
    }
    private static var oldestAge: MetricNameDescriptor {
        MetricNameDescriptor(
            metricName: "curlqueue_durable_oldest_available_job_age_seconds", unitName: "",
            helpText: "How long the queue's oldest available job has waited for a worker (0 when none waits).")
    }
    private static var workersAlive: MetricNameDescriptor {
        MetricNameDescriptor(
            metricName: "curlqueue_durable_workers_alive", unitName: "",
            helpText: "Workers registered with the store whose registration has not expired.")
    }
    private static var jobs: MetricNameDescriptor {
        MetricNameDescriptor(
            metricName: "curlqueue_durable_jobs", unitName: "",
            helpText: "The job store's jobs of the queue by state, counted at this scrape.")
    }

    /// The exposition, after asking `store` for `queue`'s job counts by state, its oldest
    /// available job's age and the live workers (`counts` and `health`: docs/performance.md has
    /// their cost on 100,000 jobs). A store that does not answer sets
    /// `curlqueue_durable_store_up` to 0 and leaves the other values as they were.
    func text(store: any JobStore, queue: String) async -> String {
        let labels = [("queue", queue)]
        let up = registry.makeGauge(descriptor: Self.storeUp, labels: labels)
        if let counts = try? await store.counts(queue: queue), let health = try? await store.health(queue: queue) {
            for state in JobState.allCases {
                registry.makeGauge(descriptor: Self.jobs, labels: labels + [("state", state.rawValue)])
                    .set(to: Double(counts[state] ?? 0))
            }
            let age = health.oldestAvailableAge.components
            registry.makeGauge(descriptor: Self.oldestAge, labels: labels)
                .set(to: Double(age.seconds) + Double(age.attoseconds) / 1e18)
            registry.makeGauge(descriptor: Self.workersAlive, labels: labels).set(to: Double(health.workersAlive))
            up.set(to: 1)
        } else {
            up.set(to: 0)
        }
        return text()
    }
}
