import CurlQueueDurable
import Foundation
import NIOConcurrencyHelpers

/// aria2's WebSocket notifications (`aria2.onDownloadStart` …), from the store: it is read
/// every half second while a WebSocket is open, and each job whose aria2 status changed since
/// the read before is announced. So a job started, finished or removed by any daemon of the
/// store is announced by every daemon, at most half a second (plus a heartbeat, for another
/// daemon's cancel) late; a change undone within one period is not seen.
///
/// A WebSocket's first message waits for a read of the store taken after it connected (the
/// baseline), so that what it asks for is announced even when it happens within one period.
actor Aria2Notifier {
    private let store: any JobStore
    private let queue: String
    private let clients: WebSocketClients
    private var known: [JobID: String]?
    private var task: Task<Void, Never>?
    static let period = Duration.milliseconds(500)

    init(store: any JobStore, queue: String, clients: WebSocketClients) {
        self.store = store
        self.queue = queue
        self.clients = clients
    }

    func start() {
        task = Task { [weak self] in
            while !Task.isCancelled, let self {
                await self.tick()
                try? await Task.sleep(for: Self.period)  // the poll's period
            }
        }
    }

    func stop() {
        task?.cancel()
        task = nil
    }

    private func tick() async {
        if clients.count == 0 {
            known = nil  // a new client hears about changes from its connection on
        } else {
            await poll()
        }
    }

    /// Waits until the store was read since the caller's WebSocket connected.
    func baseline() async {
        if known == nil { await poll() }
    }

    private func poll() async {
        guard let jobs = try? await store.jobs(JobFilter(queue: queue, limit: 100_000)) else { return }
        var now: [JobID: String] = [:]
        for job in jobs { now[job.id] = Aria2RPC.status(of: job) }
        if let before = known {
            for (id, status) in now.sorted(by: { $0.key < $1.key }) where before[id] != status {
                if let method = Self.method(to: status) { clients.broadcast(Self.message(method, gid: GID.of(id))) }
            }
        }
        known = now
    }

    /// The notification for a change to aria2 status `after`, if aria2 sends one for it.
    static func method(to after: String) -> String? {
        switch after {
        case "active": "aria2.onDownloadStart"
        case "paused": "aria2.onDownloadPause"
        case "removed": "aria2.onDownloadStop"
        case "complete": "aria2.onDownloadComplete"
        case "error": "aria2.onDownloadError"
        default: nil
        }
    }

    static func message(_ method: String, gid: String) -> String {
        RPCValue.object([
            ("jsonrpc", .string("2.0")), ("method", .string(method)),
            ("params", .array([.object([("gid", .string(gid))])])),
        ]).json
    }
}
