// A durable daemon on one SQLite file: jobs survive a restart, a crash or a deploy.
//
//     swift run DurableDaemon [STORE]
//
// It enqueues a few downloads from a local server (127.0.0.1, random port), runs a worker
// until they are all handled, prints the store's record, and stops on SIGTERM or Ctrl-C as a
// daemon should: no more claims, transfers given 10 s to finish, the rest given back to the
// store with their .part files kept for the next run. The worker runs in a swift-service-lifecycle
// ServiceGroup, whose graceful shutdown signals are SIGTERM and SIGINT.
import CurlQueue
import CurlQueueDurable
import CurlQueueSQLite
import CurlQueueDemoServer
import CurlQueueDurableService
import Foundation
import Logging
import ServiceLifecycle

let server = try await DemoServer.start()
let folder = FileManager.default.temporaryDirectory.appendingPathComponent("DurableDaemon-\(getpid())")
try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
let path = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : folder.appendingPathComponent("jobs.sqlite").path
let store = try SQLiteJobStore(path: path)

// Jobs are values: a request, a handler name, a retry policy. Enqueued once, they stay.
let jobs = (0..<6).map { index in
    JobSpec(kind: "download",
            request: JobRequest(url: server.baseURL + "/bytes/300000?drip=20&chunk=30000&job=\(index)",
                                destination: "downloads/file\(index).bin"),
            priority: index == 5 ? .high : .normal,
            metadata: ["batch": "example"])
}
for result in try await store.enqueue(jobs, queue: "default", order: .fifo) { print("enqueued job \(result.id)") }

let worker = DurableWorker(store: store, requestQueue: RequestQueue(maxConcurrentRequestCount: 3),
                           configuration: .init(folder: folder))
let handled = Locked(0)
// Runs at least once per recorded outcome: idempotent (printing is).
worker.register(kind: "download") { job in
    switch job.outcome {
    case .completed(let result): print("job \(job.record.id): HTTP \(result.status), \(result.bytes) bytes -> \(result.file ?? "memory")")
    case .failed(let reason, _), .cancelled(let reason), .retry(let reason, _, _): print("job \(job.record.id): \(reason)")
    }
    if handled.withLock({ $0 += 1; return $0 }) == jobs.count { worker.stop() }
}

// SIGTERM and SIGINT shut the group down gracefully: the worker's stop(drain: 10 s). When the
// worker stops by itself (above), the group shuts down too, rather than report it as a failure.
let group = ServiceGroup(configuration: .init(
    services: [.init(service: DurableWorkerService(worker, drain: .seconds(10)),
                     successTerminationBehavior: .gracefullyShutdownGroup)],
    gracefulShutdownSignals: [.sigterm, .sigint],
    logger: Logger(label: "DurableDaemon")))
try await group.run()
for state in JobState.allCases {
    if let count = try await store.counts(queue: "default")[state] { print("\(state): \(count)") }
}
try await server.shutdown()

/// A value behind a lock, for the handler's count.
final class Locked<Value>: @unchecked Sendable {  // safe: `value` is touched only with `lock` held
    private var value: Value
    private let lock = NSLock()
    init(_ value: Value) { self.value = value }
    func withLock<T>(_ body: (inout Value) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}
