// The durable stores' benchmark (run by Benchmarks/durable.py; see docs/performance.md, "Durable
// queues"). One JSON line per measurement on standard output. Modes:
//   store PATH JOBS SINGLE CLAIMERS...   enqueue SINGLE jobs one per call (one transaction each),
//                                        JOBS in calls of 1,000, then for each count of claimers
//                                        (separate store handles, so separate connections) claim +
//                                        finish + markHandled of JOBS waiting jobs, one per claim
//   init PATH                            creates an empty store (the schema) for the SQL-only ceiling
//   requests PATH URL COUNT C [FOLDER]   COUNT GETs of URL at concurrency C: the in-memory
//                                        RequestQueue, then DurableWorker on the SQLite store at
//                                        PATH (enqueued in calls of 1,000, timed with the run);
//                                        bodies to files under FOLDER when given
//   serve PATH [URL]                     a DurableWorker on PATH (enqueues one job of URL first);
//                                        runs until killed: the recovery measurement's worker
import CurlQueue
import CurlQueueDurable
import CurlQueueSQLite
import Foundation

/// CPU seconds (user + system) of this process so far.
func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// Prints one measurement: jobs/s and CPU µs per job over `jobs`.
func report(_ name: String, jobs: Int, extra: [String: String] = [:], _ body: () async throws -> Void) async throws {
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
    fields += extra.sorted(by: { $0.key < $1.key }).map { "\"\($0.key)\":\($0.value)" }
    FileHandle.standardOutput.write(Data(("{" + fields.joined(separator: ",") + "}\n").utf8))
}

func spec(_ url: String, destination: String? = nil) -> JobSpec {
    JobSpec(kind: "get", request: JobRequest(url: url, destination: destination), duplicates: .allow)
}

func fresh(_ path: String) throws -> SQLiteJobStore {
    for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    return try SQLiteJobStore(path: path)
}

func enqueueBatched(_ store: SQLiteJobStore, _ count: Int, url: String, destination: ((Int) -> String?)? = nil) async throws {
    var start = 0
    while start < count {
        let end = min(start + 1000, count)
        _ = try await store.enqueue((start..<end).map { spec(url, destination: destination?($0)) }, queue: "bench", order: .fifo)
        start = end
    }
}

func storeMode(path: String, jobs: Int, single: Int, claimers: [Int]) async throws {
    let url = "http://127.0.0.1:9/item"
    var store = try fresh(path)
    try await report("enqueue-1", jobs: single) {
        for _ in 0..<single { _ = try await store.enqueue([spec(url)], queue: "bench", order: .fifo) }
    }
    store = try fresh(path)
    try await report("enqueue-1000", jobs: jobs) { try await enqueueBatched(store, jobs, url: url) }
    let result = JobOutcome.completed(JobResult(status: 200, bytes: 1024))
    for count in claimers {
        store = try fresh(path)
        try await enqueueBatched(store, jobs, url: url)
        let handles = try (0..<count).map { _ in try SQLiteJobStore(path: path) }
        try await report("claim-finish", jobs: jobs, extra: ["claimers": "\(count)"]) {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for handle in handles {
                    group.addTask {
                        let worker = WorkerInfo(node: "bench", pid: getpid())
                        try await handle.register(worker)
                        while let job = try await handle.claim(queue: "bench", kinds: ["get"], limit: 1, worker: worker.id).first {
                            guard try await handle.finish(job.lease, result), try await handle.markHandled(job.lease) else {
                                throw CocoaError(.coderInvalidValue)
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
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
    let store = try fresh(path)
    let durable = Countdown(count)
    let folderURL = URL(fileURLWithPath: folder ?? NSTemporaryDirectory())
    try await report("durable-sqlite", jobs: count, extra: ["concurrency": "\(concurrency)"]) {
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
}

func serveMode(path: String, url: String?) async throws {
    let store = try SQLiteJobStore(path: path)
    if let url { _ = try await store.enqueue([spec(url)], queue: "bench", order: .fifo) }
    var configuration = DurableWorker.Configuration(folder: URL(fileURLWithPath: NSTemporaryDirectory()))
    configuration.queue = "bench"
    let worker = DurableWorker(store: store, requestQueue: RequestQueue(maxConcurrentRequestCount: 8), configuration: configuration)
    worker.register(kind: "get") { _ in }
    FileHandle.standardOutput.write(Data("{\"worker\":\"\(worker.info.id)\"}\n".utf8))
    try await worker.run()
}

let arguments = CommandLine.arguments
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
    _ = try fresh(argument(2))
case "requests":
    try await requestsMode(path: argument(2), url: argument(3), count: Int(argument(4)) ?? 0, concurrency: Int(argument(5)) ?? 8,
                           folder: arguments.count > 6 ? arguments[6] : nil)
case "serve":
    try await serveMode(path: argument(2), url: arguments.count > 3 ? arguments[3] : nil)
default:
    _ = argument(99)
}
