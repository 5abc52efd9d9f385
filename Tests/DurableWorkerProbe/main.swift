// A test helper: a durable worker in a process of its own, for the tests that kill, stop and
// continue it.
//
//   DurableWorkerProbe open STORE           opens (creating) the store and exits
//   DurableWorkerProbe hold STORE           registers a worker, claims every job of "default" and
//                                           waits to be killed (no heartbeat)
//   DurableWorkerProbe run STORE FOLDER N   runs a worker (N slots) on queue "default" until every
//                                           job is final and handled, then exits 0. Each handler
//                                           call appends "ID PID fresh|rerun" to FOLDER/handled.log
//                                           (fresh: this process's finish recorded the outcome;
//                                           rerun: the outcome was recorded earlier, by a worker
//                                           that died before its handler returned); a job whose
//                                           credential is "crash" aborts the process when it starts;
//                                           one whose metadata "handler" is "crash" aborts it in its
//                                           handler.
//   DurableWorkerProbe disk PATH            reads commands from stdin, one a line, and answers each
//                                           with one line, "ok …" or "error <description>": open,
//                                           enqueue N (N jobs of 4 KiB), claim, finish, counts, close,
//                                           quit, on the SQLite store at PATH. For the full-disk and
//                                           read-only tests.
//
// STORE is `sqlite:PATH`, `postgres://…` (or `postgresql://…`), or a plain path (SQLite).
// The environment sets the times, in seconds, so that tests can use short leases:
//   CQ_PROBE_TTL          the store's worker TTL (its default, 60, when unset)
//   CQ_PROBE_HEARTBEAT    the heartbeat interval (1)
//   CQ_PROBE_SELF_FENCE   the self-fence (10)
//   CQ_PROBE_MAINTENANCE  the maintenance interval (0.5)
import CurlQueue
import CurlQueueDurable
import CurlQueuePostgres
import CurlQueueSQLite
import Foundation

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    FileHandle.standardError.write(Data("usage: DurableWorkerProbe open STORE | hold STORE | run STORE FOLDER N\n".utf8))
    exit(2)
}
if arguments[1] == "disk" {
    let me = WorkerInfo(node: WorkerInfo.localNode, pid: getpid())
    var opened: SQLiteJobStore?
    var leases: [Lease] = []
    var enqueued = 0
    func answer(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
    while let line = readLine() {
        let words = line.split(separator: " ").map(String.init)
        do {
            switch words.first {
            case "open":
                opened = try SQLiteJobStore(path: arguments[2])
                answer("ok")
                continue
            case "close":
                // Dropping the last reference closes its connection and its workers' lock files,
                // but the store's queue may still hold it for a moment (the block that answered
                // the last call): "ok" only once it is gone, so no file stays open behind it (a
                // remount read-only of a file system with one open for writing fails, EBUSY).
                weak let closing = opened
                opened = nil
                leases = []
                var waits = 0
                while closing != nil, waits < 3000 {
                    usleep(10_000)  // polls an event that signals nothing: the queue's last release
                    waits += 1
                }
                answer(closing == nil ? "ok" : "error the store was not released within 30 s")
                continue
            case "quit":
                exit(0)
            default:
                break
            }
            guard let store = opened else {
                answer("error no store open")
                continue
            }
            switch words.first {
            case "enqueue":
                let count = Int(words.last ?? "") ?? 1
                let specs = (0..<count).map { index in
                    JobSpec(kind: "download", request: JobRequest(url: "http://127.0.0.1:9/\(enqueued + index)"),
                            metadata: ["fill": String(repeating: "x", count: 4096)])
                }
                _ = try await store.enqueue(specs, queue: "default", order: .fifo)
                enqueued += count
                answer("ok")
            case "claim":
                try await store.register(me)
                leases += try await store.claim(queue: "default", kinds: ["download"], limit: 1000, worker: me.id).map(\.lease)
                answer("ok \(leases.count)")
            case "finish":
                for lease in leases { _ = try await store.finish(lease, .completed(JobResult(status: 200, bytes: 0))) }
                leases = []
                answer("ok")
            case "counts":
                let counts = try await store.counts(queue: nil)
                answer("ok " + counts.map { "\($0.key.rawValue)=\($0.value)" }.sorted().joined(separator: " "))
            default:
                answer("error unknown command \(line)")
            }
        } catch {
            answer("error \(error)")
        }
    }
    exit(0)
}
let environment = ProcessInfo.processInfo.environment
func seconds(_ name: String, _ fallback: Double) -> Duration {
    .milliseconds(Int64((environment[name].flatMap(Double.init) ?? fallback) * 1000))
}
let ttl = environment["CQ_PROBE_TTL"].flatMap(Double.init)

func openStore(_ argument: String) async throws -> any JobStore {
    if argument.hasPrefix("postgres://") || argument.hasPrefix("postgresql://") {
        var configuration = PostgresJobStore.Configuration()
        if let ttl { configuration.workerTTL = ttl }
        return try await PostgresJobStore.open(url: argument, configuration: configuration)
    }
    var options = SQLiteJobStore.Options()
    if let ttl { options.workerTTL = .milliseconds(Int64(ttl * 1000)) }
    let path = argument.hasPrefix("sqlite:") ? String(argument.dropFirst("sqlite:".count)) : argument
    return try SQLiteJobStore(path: path, options: options)
}

let store = try await openStore(arguments[2])
if arguments[1] == "open" {
    print("opened")
    exit(0)
}
if arguments[1] == "hold" {
    let me = WorkerInfo(node: WorkerInfo.localNode, pid: getpid())
    try await store.register(me)
    _ = try await store.claim(queue: "default", kinds: ["download"], limit: 1000, worker: me.id)
    while true { sleep(3600) }  // held until the test kills the process
}
let folder = URL(fileURLWithPath: arguments[3])
let queue = RequestQueue(maxConcurrentRequestCount: Int(arguments[4]) ?? 4)
var configuration = DurableWorker.Configuration(folder: folder)
configuration.heartbeatInterval = seconds("CQ_PROBE_HEARTBEAT", 1)
configuration.selfFence = seconds("CQ_PROBE_SELF_FENCE", 10)
configuration.maintenanceInterval = seconds("CQ_PROBE_MAINTENANCE", 0.5)
configuration.pollInterval = .milliseconds(200)
let worker = DurableWorker(store: store, requestQueue: queue, configuration: configuration)
let log = folder.appendingPathComponent("handled.log").path
let pid = getpid()
worker.register(kind: "download") { job in
    if job.record.spec.metadata["handler"] == "crash" { abort() }  // a handler that kills its worker every time
    // One write(2) of one short line to an O_APPEND file: lines of several processes never mix.
    let descriptor = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
    // Fresh: this worker recorded the outcome (the job came to it with none). A rerun comes
    // with the outcome already recorded. (Not `job.response == nil`: a file found already
    // there is recorded with no response, and was once taken for a rerun.)
    let line = "\(job.record.id) \(pid) \(job.record.outcome == nil ? "fresh" : "rerun")\n"
    _ = line.withCString { write(descriptor, $0, strlen($0)) }
    close(descriptor)
}
worker.setCredentialProvider { credential, _ in
    if credential == "crash" { abort() }  // the poison pill: kills its worker every time
    return []
}
let watcher = Task {
    // Stops the worker once the store holds nothing left to do (bounded by the test's timeout).
    while !Task.isCancelled {
        try await Task.sleep(for: .milliseconds(200))  // the sleep IS the poll of the store
        // The counts first: cheap while jobs wait or run; the whole list only when none does.
        let counts = try await store.counts(queue: "default")
        guard !counts.isEmpty, counts.allSatisfy({ $0.key.isFinal || $0.value == 0 }) else { continue }
        let unhandled = try await store.jobs(JobFilter(limit: 100_000)).filter { !$0.handled }
        if unhandled.isEmpty {
            worker.stop(drain: .zero)
            return
        }
    }
}
try await worker.run()
watcher.cancel()
if let postgres = store as? PostgresJobStore { await postgres.close() }
print("done")
