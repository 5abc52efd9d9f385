import CoreMetrics
import Foundation

/// A queue's swift-metrics objects, made once per queue (per host, when the queue labels by
/// host), never per request: a backend's `make…` call may take a lock and look up a table.
///
/// A queue made while the factory is swift-metrics' no-op one (nothing bootstrapped) has none
/// of these (``make(queue:labelsByHost:)`` returns nil), so a GET pays one nil check per event.
///
/// Where it records: `add` on the caller's thread; the start, the retry and the finish on the
/// thread that decided them, often the engine thread, never under a lock of CurlQueue's. A
/// swift-metrics handler is thread-safe and cheap by contract (async-http-client records on its
/// event loop the same way); its cost with a backend is in docs/performance.md.
final class QueueMetrics: Sendable {
    let queue: String
    private let factory: any MetricsFactory
    private let labelsByHost: Bool
    /// Without host labels: the one set. With them: one set per host, made on first use.
    private let unlabelled: Instruments?
    private let byHost: Locked<[String: Instruments]>

    /// Nil when the factory in effect (`MetricsSystem.factory`: the bootstrapped one, or a
    /// task-local one bound with `withMetricsFactory`) is the no-op factory.
    static func make(queue: String, labelsByHost: Bool) -> QueueMetrics? {
        let factory = MetricsSystem.factory
        if factory is NOOPMetricsHandler { return nil }
        return QueueMetrics(queue: queue, labelsByHost: labelsByHost, factory: factory)
    }

    private init(queue: String, labelsByHost: Bool, factory: any MetricsFactory) {
        self.queue = queue
        self.factory = factory
        self.labelsByHost = labelsByHost
        unlabelled = labelsByHost ? nil : Instruments(dimensions: [("queue", queue)], factory: factory)
        byHost = Locked([:])
    }

    /// The instruments `operation`'s events go to.
    func instruments(for request: Request) -> Instruments {
        if let unlabelled { return unlabelled }
        let host: String = switch request.target {
        case .parsed(let url): url.host?.lowercased() ?? ""
        case .text(let text): text.host.lowercased()
        }
        return byHost.withLock { sets in
            if let set = sets[host] { return set }
            let set = Instruments(dimensions: [("queue", queue), ("host", host)], factory: factory)
            sets[host] = set
            return set
        }
    }

    /// The metrics of one label set (a queue, or a queue and a host). The labels that vary
    /// per event (status class, error type, retry reason) come from small fixed sets: their
    /// instruments are made when first needed and kept.
    final class Instruments: Sendable {
        let dimensions: [(String, String)]
        let factory: any MetricsFactory
        let started: Counter
        let pending: Meter
        let running: Meter
        let bytesSent: Counter
        let bytesReceived: Counter
        let nameLookup: CoreMetrics.Timer
        let connect: CoreMetrics.Timer
        let tlsHandshake: CoreMetrics.Timer
        let firstByte: CoreMetrics.Timer
        let total: CoreMetrics.Timer
        /// `finished` of a response, by status class (``statusClasses``): made up front, so that
        /// the common finish takes no lock and makes no key.
        private let responses: [Counter]
        /// `finished` of an error, by type, and `retries` by reason, made on first use.
        private let keyed: Locked<[String: Counter]>

        static let statusClasses = ["other", "1xx", "2xx", "3xx", "4xx", "5xx"]

        init(dimensions: [(String, String)], factory: any MetricsFactory) {
            self.dimensions = dimensions
            self.factory = factory
            started = Counter(label: MetricNames.started, dimensions: dimensions, factory: factory)
            pending = Meter(label: MetricNames.pending, dimensions: dimensions, factory: factory)
            running = Meter(label: MetricNames.running, dimensions: dimensions, factory: factory)
            bytesSent = Counter(label: MetricNames.bytesSent, dimensions: dimensions, factory: factory)
            bytesReceived = Counter(label: MetricNames.bytesReceived, dimensions: dimensions, factory: factory)
            nameLookup = Timer(label: MetricNames.nameLookup, dimensions: dimensions, factory: factory)
            connect = Timer(label: MetricNames.connect, dimensions: dimensions, factory: factory)
            tlsHandshake = Timer(label: MetricNames.tlsHandshake, dimensions: dimensions, factory: factory)
            firstByte = Timer(label: MetricNames.firstByte, dimensions: dimensions, factory: factory)
            total = Timer(label: MetricNames.total, dimensions: dimensions, factory: factory)
            responses = Self.statusClasses.map { statusClass in
                Counter(
                    label: MetricNames.finished,
                    dimensions: dimensions + [("outcome", "response"), ("status_class", statusClass), ("error_type", "none")],
                    factory: factory)
            }
            keyed = Locked([:])
        }

        /// The counter `label` with `extra` dimensions after the set's own.
        private func counter(_ label: String, _ extra: [(String, String)]) -> Counter {
            let key = label + extra.map { "\u{0}\($0.1)" }.joined()
            return keyed.withLock { counters in
                if let counter = counters[key] { return counter }
                let counter = Counter(label: label, dimensions: dimensions + extra, factory: factory)
                counters[key] = counter
                return counter
            }
        }

        /// An operation's outcome: its counter, and for a response its sizes and timings
        /// (those of the attempt that produced it).
        func finished(_ result: Result<Response, RequestError>) {
            switch result {
            case .success(let response):
                let code = response.status.code
                responses[(100..<600).contains(code) ? code / 100 : 0].increment()
                let metrics = response.metrics
                bytesSent.increment(by: metrics.bytesSent)
                bytesReceived.increment(by: metrics.bytesReceived)
                nameLookup.recordNanoseconds(Self.nanoseconds(metrics.nameLookup))
                connect.recordNanoseconds(Self.nanoseconds(metrics.connect))
                if metrics.tlsHandshake > .zero { tlsHandshake.recordNanoseconds(Self.nanoseconds(metrics.tlsHandshake)) }
                firstByte.recordNanoseconds(Self.nanoseconds(metrics.timeToFirstByte))
                total.recordNanoseconds(Self.nanoseconds(metrics.total))
            case .failure(let error):
                let outcome = error == .cancelled ? "cancelled" : "error"
                counter(MetricNames.finished, [("outcome", outcome), ("status_class", "none"), ("error_type", Self.errorType(error))])
                    .increment()
            }
        }

        /// A retry of an attempt that ended with `cause`.
        func retried(_ cause: RetriedAttempt.Cause) {
            let reason = switch cause {
            case .status(let code): "status_\(code)"
            case .error(let error): Self.errorType(error)
            }
            counter(MetricNames.retries, [("reason", reason)]).increment()
        }

        static func nanoseconds(_ duration: Duration) -> Int64 {
            let (seconds, attoseconds) = duration.components
            return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
        }

        /// OpenTelemetry's `error.type` for an error: libcurl's code name (`CURLE_…`, a fixed
        /// set) or the kind of the error. Never the message: labels stay bounded.
        static func errorType(_ error: RequestError) -> String {
            switch error {
            case .cancelled: "cancelled"
            case .timedOut(let failure), .transport(let failure): failure.code.name
            case .invalidRequest: "invalid_request"
            case .fileSystem: "file_system"
            }
        }
    }
}

/// The names of the core's metrics (docs/observability.md lists them with their labels).
enum MetricNames {
    static let started = "curlqueue_requests_started_total"
    static let finished = "curlqueue_requests_finished_total"
    static let retries = "curlqueue_retries_total"
    static let pending = "curlqueue_requests_pending"
    static let running = "curlqueue_requests_running"
    static let bytesSent = "curlqueue_request_body_bytes_sent_total"
    static let bytesReceived = "curlqueue_response_body_bytes_received_total"
    static let nameLookup = "curlqueue_name_lookup_duration_seconds"
    static let connect = "curlqueue_connect_duration_seconds"
    static let tlsHandshake = "curlqueue_tls_handshake_duration_seconds"
    static let firstByte = "curlqueue_first_byte_duration_seconds"
    static let total = "curlqueue_request_duration_seconds"
}
