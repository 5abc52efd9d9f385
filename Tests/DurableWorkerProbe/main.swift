// A test helper: a durable worker in a process of its own, for the tests that kill it.
//
//   DurableWorkerProbe open DB           opens (creating) the store and exits
//   DurableWorkerProbe hold DB           registers a worker, claims every job of "default" and
//                                        waits to be killed (no heartbeat)
//   DurableWorkerProbe run DB FOLDER N   runs a worker (N slots) on queue "default" until every
//                                        job is final and handled, then exits 0. Handled jobs are
//                                        appended to FOLDER/handled.log; a job whose credential
//                                        is "crash" aborts the process when it starts.
import CurlQueue
import CurlQueueDurable
import CurlQueueSQLite
import Foundation

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    FileHandle.standardError.write(Data("usage: DurableWorkerProbe open DB | run DB FOLDER N\n".utf8))
    exit(2)
}
let store = try SQLiteJobStore(path: arguments[2])
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
configuration.heartbeatInterval = .seconds(1)
configuration.selfFence = .seconds(10)
configuration.maintenanceInterval = .milliseconds(500)
configuration.pollInterval = .milliseconds(200)
let worker = DurableWorker(store: store, requestQueue: queue, configuration: configuration)
let log = folder.appendingPathComponent("handled.log").path
worker.register(kind: "download") { job in
    let descriptor = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
    let line = "\(job.record.id)\n"
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
        let jobs = try await store.jobs(JobFilter(limit: 100_000))
        if !jobs.isEmpty, jobs.allSatisfy({ $0.state.isFinal && $0.handled }) {
            worker.stop(drain: .zero)
            return
        }
    }
}
try await worker.run()
watcher.cancel()
print("done")
