// The durable stores' benchmark (run by Benchmarks/durable.py; see docs/performance.md, "Durable
// queues"). One JSON line per measurement on standard output. STORE is a SQLite file's path or a
// PostgreSQL URL (postgres://…: "fresh" there drops and recreates the database's public schema,
// so give it a database of its own). Modes:
//   store STORE JOBS SINGLE CLAIMERS...  enqueue SINGLE jobs one per call (one transaction each),
//                                        JOBS in calls of 1,000, then for each count of claimers
//                                        (separate store handles, so separate connections) claim +
//                                        finish + markHandled of JOBS waiting jobs, one per claim
//                                        (of only the first N with --drain N)
//   init STORE                           creates an empty store (the schema) for the SQL-only ceiling
//   enqueue STORE URL COUNT              COUNT jobs of URL in calls of 1,000 (for `serve` to drain)
//   requests STORE URL COUNT C [FOLDER]  COUNT GETs of URL at concurrency C: the in-memory
//                                        RequestQueue, then DurableWorker on the store (enqueued in
//                                        calls of 1,000, timed with the run); bodies to files
//                                        under FOLDER when given
//   counts STORE JOBS                    a fresh store with JOBS waiting jobs of one queue (in calls
//                                        of 1,000), then `counts(queue:)` 20 times and `health(queue:)`
//                                        20 times: what a scrape of the daemon's /metrics asks of the
//                                        store (ms per query)
//   serve STORE [URL]                    a DurableWorker on STORE (enqueues one job of URL first),
//                                        concurrency --concurrency (8); runs until killed: the
//                                        recovery and worker-process measurements' worker
// Options: --drain N (above); --ttl S, PostgreSQL's worker TTL (60 s), with the worker's
// heartbeat at TTL/4, self-fence at 3/4 TTL and maintenance at TTL/6, the defaults' proportions.
// With CQ_BENCH_SERVER_PID (the postmaster's pid) each measurement also gives the server's CPU
// per job (server_cpu_us_per_job): that process and its children, from /proc.
import CLibPQ
import CurlQueue
import CurlQueueDurable
import CurlQueuePostgres
import CurlQueueSQLite
import Foundation

/// CPU seconds (user + system) of this process so far.
func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// CPU seconds (user + system) of the process `pid` and of all its children, live (from their
/// /proc/PID/stat) and reaped (its cutime and cstime): a PostgreSQL server's, given its postmaster.
func serverCPUSeconds(_ pid: Int32) -> Double {
    let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
    /// Fields 3 onwards of /proc/PID/stat (after the command name in parentheses).
    func fields(_ pid: Int32) -> [Substring]? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return nil }
        return text[text.index(after: close)...].split(separator: " ")
    }
    func seconds(_ f: [Substring], _ range: ClosedRange<Int>) -> Double {
        range.reduce(0) { $0 + (Double(f[$1]) ?? 0) } / ticks
    }
    guard let own = fields(pid), own.count > 14 else { return 0 }
    var total = seconds(own, 11...14)  // utime, stime, cutime, cstime
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    for entry in entries {
        guard let child = Int32(entry), child != pid, let f = fields(child), f.count > 12, f[1] == "\(pid)" else { continue }
        total += seconds(f, 11...12)
    }
    return total
}

let serverPID = ProcessInfo.processInfo.environment["CQ_BENCH_SERVER_PID"].flatMap { Int32($0) }

/// Prints one measurement: jobs/s and CPU µs per job over `jobs`.
func report(_ name: String, jobs: Int, extra: [String: String] = [:], _ body: () async throws -> Void) async throws {
    let server0 = serverPID.map(serverCPUSeconds)
    let cpu0 = cpuSeconds()
    let t0 = ContinuousClock.now
    try await body()
    let elapsed = ContinuousClock.now - t0
    let wall = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    let cpu = cpuSeconds() - cpu0
    var fields = [
        "\"case\":\"\(name)\"", "\"jobs\":\(jobs)", "\"seconds\":\(wall)",
        "\"jobs_per_s\":\(Double(jobs) / wall)", "\"cpu_us_per_job\":\(cpu * 1e6 / Double(jobs))",
    ]
    if let serverPID, let server0 {
        fields.append("\"server_cpu_us_per_job\":\((serverCPUSeconds(serverPID) - server0) * 1e6 / Double(jobs))")
    }
    fields += extra.sorted(by: { $0.key < $1.key }).map { "\"\($0.key)\":\($0.value)" }
    FileHandle.standardOutput.write(Data(("{" + fields.joined(separator: ",") + "}\n").utf8))
}

func spec(_ url: String, destination: String? = nil) -> JobSpec {
    JobSpec(kind: "get", request: JobRequest(url: url, destination: destination), duplicates: .allow)
}

/// The options (`--name value`), and the other arguments in order.
let (options, arguments): ([String: String], [String]) = {
    var options: [String: String] = [:]
    var rest: [String] = []
    var all = CommandLine.arguments[...]
    while let next = all.popFirst() {
        if next.hasPrefix("--"), let value = all.popFirst() { options[String(next.dropFirst(2))] = value } else { rest.append(next) }
    }
    return (options, rest)
}()
let workerTTL = options["ttl"].flatMap(Double.init) ?? 60

func isPostgres(_ target: String) -> Bool { target.hasPrefix("postgres://") || target.hasPrefix("postgresql://") }

/// A handle on the store at `target`. PostgreSQL: one connection and no LISTEN for the store
/// alone; for a worker (`worker`), the default configuration (two connections and LISTEN).
func open(_ target: String, worker: Bool = false) async throws -> any JobStore {
    guard isPostgres(target) else { return try SQLiteJobStore(path: target) }
    var configuration = PostgresJobStore.Configuration()
    if !worker {
        configuration.connections = 1
        configuration.listens = false
    }
    configuration.workerTTL = workerTTL
    return try await PostgresJobStore.open(url: target, configuration: configuration)
}

func close(_ store: any JobStore) async {
    if let store = store as? PostgresJobStore { await store.close() }
}

/// An empty store at `target`: the SQLite file removed, or the database's public schema dropped.
func fresh(_ target: String) async throws -> any JobStore {
    if isPostgres(target) {
        let connection = PQconnectdb(target)
        defer { PQfinish(connection) }
        let result = PQexec(connection, "DROP SCHEMA public CASCADE; CREATE SCHEMA public")
        defer { PQclear(result) }
        guard PQresultStatus(result) == PGRES_COMMAND_OK else {
            throw NSError(domain: "durable-bench", code: 1, userInfo: [NSLocalizedDescriptionKey: String(cString: PQerrorMessage(connection))])
        }
    } else {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: target + suffix) }
    }
    return try await open(target)
}

func enqueueBatched(_ store: any JobStore, _ count: Int, url: String, destination: ((Int) -> String?)? = nil) async throws {
    var start = 0
    while start < count {
        let end = min(start + 1000, count)
        _ = try await store.enqueue((start..<end).map { spec(url, destination: destination?($0)) }, queue: "bench", order: .fifo)
        start = end
    }
}

func storeMode(path: String, jobs: Int, single: Int, claimers: [Int]) async throws {
    let url = "http://127.0.0.1:9/item"
    var store = try await fresh(path)
    try await report("enqueue-1", jobs: single) {
        for _ in 0..<single { _ = try await store.enqueue([spec(url)], queue: "bench", order: .fifo) }
    }
    await close(store)
    store = try await fresh(path)
    try await report("enqueue-1000", jobs: jobs) { try await enqueueBatched(store, jobs, url: url) }
    await close(store)
    let result = JobOutcome.completed(JobResult(status: 200, bytes: 1024))
    let drain = min(jobs, options["drain"].flatMap { Int($0) } ?? jobs)
    for count in claimers {
        store = try await fresh(path)
        try await enqueueBatched(store, jobs, url: url)
        await close(store)
        var handles: [any JobStore] = []
        for _ in 0..<count { handles.append(try await open(path)) }
        let claimed = Guarded(0)
        try await report("claim-finish", jobs: drain, extra: ["claimers": "\(count)", "waiting": "\(jobs)"]) {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for handle in handles {
                    group.addTask {
                        let worker = WorkerInfo(node: "bench", pid: getpid())
                        try await handle.register(worker)
                        while claimed.withLock({ n -> Bool in
                                  guard n < drain else { return false }
                                  n += 1
                                  return true
                              }),
                              let job = try await handle.claim(queue: "bench", kinds: ["get"], limit: 1, worker: worker.id).first {
                            guard try await handle.finish(job.lease, result), try await handle.markHandled(job.lease) else {
                                throw CocoaError(.coderInvalidValue)
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        for handle in handles { await close(handle) }
    }
}

/// Counts completions and resumes a waiter at `total`.
final class Countdown: Sendable {
    private let state: Guarded<(left: Int, failed: Int, waiter: CheckedContinuation<Int, Never>?)>
    init(_ total: Int) { state = Guarded((total, 0, nil)) }
    func done(ok: Bool) {
        let waiter = state.withLock { state -> CheckedContinuation<Int, Never>? in
            state.left -= 1
            if !ok { state.failed += 1 }
            guard state.left == 0 else { return nil }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: state.withLock { $0.failed })
    }
    func wait() async -> Int {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Bool in
                if state.left == 0 { return true }
                state.waiter = continuation
                return false
            }
            if ready { continuation.resume(returning: state.withLock { $0.failed }) }
        }
    }
}

/// A lock around a value (the benchmark's own: Foundation's NSLock and a value).
final class Guarded<Value: Sendable>: @unchecked Sendable {
    // @unchecked: `value` is only read or written under `lock`.
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<T>(_ body: (inout Value) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}

func requestsMode(path: String, url: String, count: Int, concurrency: Int, folder: String?) async throws {
    let memory = Countdown(count)
    try await report("memory", jobs: count, extra: ["concurrency": "\(concurrency)"]) {
        let queue = RequestQueue(maxConcurrentRequestCount: concurrency)
        queue.allowDuplicateRequests = true
        for i in 0..<count {
            var request = Request(string: url)
            if let folder { request.destination = URL(fileURLWithPath: folder).appendingPathComponent("m\(i)") }
            queue.add(request) { result in
                if case .success(let response) = result { memory.done(ok: response.status.code == 200) } else { memory.done(ok: false) }
            }
        }
        let failed = await memory.wait()
        if failed > 0 { FileHandle.standardError.write(Data("durable-bench: \(failed) in-memory requests failed\n".utf8)) }
    }
    await close(try await fresh(path))
    let store = try await open(path, worker: true)
    let durable = Countdown(count)
    let folderURL = URL(fileURLWithPath: folder ?? NSTemporaryDirectory())
    try await report(isPostgres(path) ? "durable-postgres" : "durable-sqlite", jobs: count, extra: ["concurrency": "\(concurrency)"]) {
        try await enqueueBatched(store, count, url: url, destination: folder == nil ? nil : { "d\($0)" })
        var configuration = DurableWorker.Configuration(folder: folderURL)
        configuration.queue = "bench"
        let worker = DurableWorker(
            store: store, requestQueue: RequestQueue(maxConcurrentRequestCount: concurrency), configuration: configuration)
        worker.register(kind: "get") { job in
            if case .completed(let result) = job.outcome { durable.done(ok: result.status == 200) } else { durable.done(ok: false) }
        }
        async let running: Void = worker.run()
        let failed = await durable.wait()
        worker.stop(drain: .seconds(5))
        try await running
        if failed > 0 { FileHandle.standardError.write(Data("durable-bench: \(failed) durable jobs failed\n".utf8)) }
    }
    await close(store)
}

func serveMode(path: String, url: String?) async throws {
    let store = try await open(path, worker: true)
    if let url { _ = try await store.enqueue([spec(url)], queue: "bench", order: .fifo) }
    var configuration = DurableWorker.Configuration(folder: URL(fileURLWithPath: NSTemporaryDirectory()))
    configuration.queue = "bench"
    if options["ttl"] != nil {
        configuration.heartbeatInterval = .milliseconds(Int(workerTTL * 250))
        configuration.selfFence = .milliseconds(Int(workerTTL * 750))
        configuration.maintenanceInterval = .milliseconds(Int(workerTTL * 1000 / 6))
    }
    let concurrency = options["concurrency"].flatMap { Int($0) } ?? 8
    let worker = DurableWorker(
        store: store, requestQueue: RequestQueue(maxConcurrentRequestCount: concurrency), configuration: configuration)
    worker.register(kind: "get") { _ in }
    FileHandle.standardOutput.write(Data("{\"worker\":\"\(worker.info.id)\"}\n".utf8))
    try await worker.run()
}

func argument(_ i: Int) -> String {
    guard i < arguments.count else {
        FileHandle.standardError.write(Data("usage: see the comment at the top of Benchmarks/DurableBench/main.swift\n".utf8))
        exit(2)
    }
    return arguments[i]
}
switch argument(1) {
case "store":
    try await storeMode(path: argument(2), jobs: Int(argument(3)) ?? 0, single: Int(argument(4)) ?? 0,
                        claimers: arguments.dropFirst(5).compactMap { Int($0) })
case "init":
    await close(try await fresh(argument(2)))
case "enqueue":
    let store = try await open(argument(2))
    try await enqueueBatched(store, Int(argument(4)) ?? 0, url: argument(3))
    await close(store)
case "requests":
    try await requestsMode(path: argument(2), url: argument(3), count: Int(argument(4)) ?? 0, concurrency: Int(argument(5)) ?? 8,
                           folder: arguments.count > 6 ? arguments[6] : nil)
case "counts":
    let store = try await fresh(argument(2))
    let jobs = Int(argument(3)) ?? 0
    try await enqueueBatched(store, jobs, url: "http://127.0.0.1:9/counted")
    var times: [Double] = []
    for _ in 0..<20 {
        let start = ContinuousClock.now
        let counts = try await store.counts(queue: "bench")
        let took = (ContinuousClock.now - start).components
        times.append(Double(took.seconds) * 1000 + Double(took.attoseconds) / 1e15)
        precondition(counts.values.reduce(0, +) == jobs, "counts \(counts) for \(jobs) jobs")
    }
    var healthTimes: [Double] = []
    for _ in 0..<20 {
        let start = ContinuousClock.now
        let health = try await store.health(queue: "bench")
        let took = (ContinuousClock.now - start).components
        healthTimes.append(Double(took.seconds) * 1000 + Double(took.attoseconds) / 1e15)
        precondition(health.oldestAvailableSince != nil, "no waiting job found")
    }
    times.sort()
    healthTimes.sort()
    print("{\"mode\":\"counts\",\"jobs\":\(jobs),\"median_ms\":\(times[times.count / 2]),\"max_ms\":\(times.last!),\"health_median_ms\":\(healthTimes[healthTimes.count / 2]),\"health_max_ms\":\(healthTimes.last!)}")
    await close(store)
case "serve":
    try await serveMode(path: argument(2), url: arguments.count > 3 ? arguments[3] : nil)
default:
    _ = argument(99)
}
