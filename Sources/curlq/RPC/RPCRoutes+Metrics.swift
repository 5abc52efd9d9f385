import CurlQueueDurable

extension RPCRoutes {
    /// `GET /metrics`: Prometheus' text (``MetricsExposition/text(store:queue:)``), on the RPC's
    /// listener and on `--metrics-listen`'s alike.
    mutating func addMetrics(_ metrics: MetricsExposition, store: any JobStore, queue: String) {
        add(.GET, "/metrics") { _ in
            let text = await metrics.text(store: store, queue: queue)
            return RPCHTTPResponse(status: .ok, contentType: "text/plain; version=0.0.4; charset=utf-8", body: Array(text.utf8))
        }
    }
}
