import CurlQueue
import CurlQueueDurable
import Foundation
import NIOHTTP1

/// The HTTP server of `curlq daemon --enable-rpc`: its routes, its RPC and its notifications.
struct DaemonRPC: Sendable {
    let server: RPCServer
    let notifier: Aria2Notifier
    let url: String

    /// Starts the server on loopback (every address with `--rpc-listen-all`).
    /// `metrics` answers `GET /metrics`; `progress` gives the live figures of the jobs this
    /// daemon runs (the store's checkpoints, every heartbeat, for the others).
    static func start(_ options: RPCOptions, store: any JobStore, queue: String, folder: URL, settings: Aria2Settings,
                      environment: [String: String], metrics: MetricsExposition?,
                      progress: @escaping @Sendable () -> [JobID: DurableWorker.Progress]) async throws -> DaemonRPC {
        let secret = options.resolvedSecret(environment)
        let rpc = Aria2RPC(
            store: store, queue: queue, folder: folder, secret: secret, settings: settings, progress: progress,
            globalOptions: [
                ("dir", folder.path), ("enable-rpc", "true"), ("rpc-listen-all", String(options.listenAll)),
                ("rpc-allow-origin-all", String(options.allowOriginAll)), ("rpc-listen-port", String(options.port)),
                ("rpc-secure", "false"), ("split", "1"), ("max-download-limit", "0"),
            ])
        var routes = RPCRoutes()
        routes.add(.POST, "/jsonrpc") { await rpc.http($0) }
        let page = StaticFiles.besideExecutable()
        routes.add(.GET, "/") { page.respond(to: $0) }
        routes.add(.GET, "/*") { page.respond(to: $0) }
        if let metrics { routes.addMetrics(metrics, store: store, queue: queue) }
        let access = RPCAccess(listensOnAll: options.listenAll, allowsAnyOrigin: options.allowOriginAll)
        let host = options.listenAll ? "0.0.0.0" : "127.0.0.1"
        let clients = WebSocketClients()
        let notifier = Aria2Notifier(store: store, queue: queue, clients: clients)
        let server = try await RPCServer.start(host: host, port: options.port, routes: routes, access: access, clients: clients) {
            await notifier.baseline()
            return await rpc.webSocket($0)
        }
        await notifier.start()
        return DaemonRPC(server: server, notifier: notifier, url: "http://127.0.0.1:\(server.port)/jsonrpc")
    }

    func stop() async {
        await notifier.stop()
        await server.stop()
    }
}
