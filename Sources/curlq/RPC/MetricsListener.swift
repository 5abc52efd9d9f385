import CurlQueueDurable

/// `curlq daemon --metrics-listen`: the RPC's `GET /metrics` route (``RPCRoutes/addMetrics(_:store:queue:)``)
/// on a server of its own, with nothing else on it (no RPC, page or WebSocket), each request's
/// `Host` checked by ``RPCAccess`` as the RPC's are.
enum MetricsListener {
    static func start(_ address: MetricsOptions.Address, listensOnAll: Bool, metrics: MetricsExposition,
                      store: any JobStore, queue: String) async throws -> RPCServer {
        var routes = RPCRoutes()
        routes.addMetrics(metrics, store: store, queue: queue)
        return try await RPCServer.start(
            host: address.host, port: address.port, routes: routes,
            access: RPCAccess(listensOnAll: listensOnAll, allowsAnyOrigin: false), clients: WebSocketClients(),
            webSocket: { _ in nil })  // never called: no route at /jsonrpc, so no upgrade
    }
}
