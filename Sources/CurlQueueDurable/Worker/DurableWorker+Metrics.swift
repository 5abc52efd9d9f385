import CoreMetrics

extension DurableWorker {
    /// A worker's swift-metrics instruments (docs/observability.md), labelled with its store
    /// queue; made once, with the worker, and only when a metrics factory is in effect then
    /// (nil otherwise: nothing is recorded). Recorded from the worker's tasks, never the
    /// engine thread, never under a lock.
    final class Metrics: Sendable {
        let claimed: Counter
        let claimFailures: Counter
        let renewals: Counter
        let renewalFailures: Counter
        let rescued: Counter
        private let finished: [String: Counter]

        static func make(queue: String) -> Metrics? {
            let factory = MetricsSystem.factory
            if factory is NOOPMetricsHandler { return nil }
            return Metrics(queue: queue, factory: factory)
        }

        private init(queue: String, factory: any MetricsFactory) {
            let labels = [("queue", queue)]
            claimed = Counter(label: "curlqueue_durable_jobs_claimed_total", dimensions: labels, factory: factory)
            claimFailures = Counter(label: "curlqueue_durable_claim_failures_total", dimensions: labels, factory: factory)
            renewals = Counter(
                label: "curlqueue_durable_lease_renewals_total", dimensions: labels + [("outcome", "renewed")], factory: factory)
            renewalFailures = Counter(
                label: "curlqueue_durable_lease_renewals_total", dimensions: labels + [("outcome", "failed")], factory: factory)
            rescued = Counter(label: "curlqueue_durable_jobs_rescued_total", dimensions: labels, factory: factory)
            var finished: [String: Counter] = [:]
            for outcome in ["completed", "retry", "failed", "cancelled"] {
                finished[outcome] = Counter(
                    label: "curlqueue_durable_jobs_finished_total", dimensions: labels + [("outcome", outcome)], factory: factory)
            }
            self.finished = finished
        }

        /// An outcome the store recorded (a fenced `finish` that took).
        func recorded(_ outcome: JobOutcome) {
            let name = switch outcome {
            case .completed: "completed"
            case .retry: "retry"
            case .failed: "failed"
            case .cancelled: "cancelled"
            }
            finished[name]?.increment()
        }
    }
}
