import CurlQueue
import CurlQueueDurable
import CurlQueueDurableService
import CurlQueueSQLite
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Logging
import ServiceLifecycle
import Testing

/// A worker run by a `ServiceGroup` (DurableWorkerService), on an SQLite store, stopped the
/// ecosystem's two ways while a slow download runs.
@Suite struct DurableWorkerServiceTests {
    /// A group running a worker with one slow download (16 KiB every 50 ms: 4 MiB take 13 s),
    /// started once its `.part` file has bytes; `stop` stops it, and the store must then hold
    /// the job back `available`, its attempt not counted, its `.part` kept, nothing `running`.
    func withRunningDownload(drain: Duration = .milliseconds(200), inGroup: Bool = true,
                             _ stop: (DurableWorker, ServiceGroup, Task<Void, any Error>) async -> Void) async throws {
        try await withServer { server in
            try await withFolder { folder in
                let store = try SQLiteJobStore(path: folder.appendingPathComponent("jobs.sqlite").path)
                let files = folder.appendingPathComponent("files")
                _ = try await store.enqueue([JobSpec(kind: "download", request: JobRequest(
                    url: server.baseURL + "/bytes/\(4 << 20)?chunk=16384&drip=50", destination: "slow.bin"))],
                    queue: "default", order: .fifo)
                let worker = DurableWorker(store: store, requestQueue: RequestQueue(maxConcurrentRequestCount: 2),
                                           configuration: .forTests(files))
                worker.register(kind: "download") { _ in }
                let group = ServiceGroup(services: [DurableWorkerService(worker, drain: drain)],
                                         logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
                let running = inGroup ? Task { try await group.run() } : Task { try await worker.run() }
                let started = await waitForFolder(files) { names(in: files).contains { $0.hasSuffix(".part") } }
                #expect(started)
                await stop(worker, group, running)
                let returned = await ends(running, within: .seconds(60))
                #expect(returned, "the group returns once the worker has given its job back")
                if !returned {
                    worker.stop(drain: .zero)
                    _ = await running.result
                }
                let records = try await store.jobs(JobFilter())
                #expect(records.count == 1)
                #expect(records.allSatisfy { $0.state == .available && $0.attempt == 0 }, "released, not counted")
                #expect(names(in: files).filter { $0.hasSuffix(".part") }.count == 1, "kept for the resume")
                #expect(try await store.counts(queue: nil)[.running] == nil, "no job left running")
            }
        }
    }

    @Test func gracefulShutdownDrainsThenGivesTheJobBackWithItsPartFileKept() async throws {
        try await withRunningDownload { _, group, _ in await group.triggerGracefulShutdown() }
    }

    @Test func cancellationStopsAtOnceAndStillGivesTheJobBack() async throws {
        try await withRunningDownload { _, _, running in running.cancel() }
    }

    @Test func cancellationDuringALongDrainStopsAtOnce() async throws {
        // A drain that outlasts the download: only the cancellation's drain zero gives it back.
        // What a graceful shutdown's handler calls, called here directly so that it surely
        // comes before the cancellation (the group's own trigger reaches the service later).
        try await withRunningDownload { worker, _, running in
            worker.stop(drain: .seconds(600))
            running.cancel()
        }
    }

    /// The same without swift-service-lifecycle: cancelling the task that awaits `run()`.
    @Test func cancellingTheTaskOfABareRunStillGivesTheJobBack() async throws {
        try await withRunningDownload(inGroup: false) { _, _, running in running.cancel() }
    }

    /// Whether `task` ends within `bound`: the sleep IS the bound, the failure's deadline.
    func ends(_ task: Task<Void, any Error>, within bound: Duration) async -> Bool {
        let (outcomes, continuation) = AsyncStream.makeStream(of: Bool.self)
        Task {
            _ = await task.result
            continuation.yield(true)
        }
        let timer = Task {
            try? await Task.sleep(for: bound)
            continuation.yield(false)
        }
        var iterator = outcomes.makeAsyncIterator()
        let ended = await iterator.next() ?? false
        timer.cancel()
        return ended
    }
}
