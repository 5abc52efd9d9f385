import CurlQueue
@testable import CurlQueueDurable
import CurlQueueSQLite
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// A `.part` left by a power loss: bytes past its checkpoint are not trusted after a reboot.
/// A test cannot reboot, so the worker's boot id is set (`Configuration.bootID`).
@Suite struct DurableWorkerRebootTests {
    static let total = 200_000
    static let checkpointed = 100_000

    /// Runs one download job of `/bytes/total` to `f.bin` whose checkpoint (`checkpointed` bytes,
    /// this node, boot `checkpointBoot`) another worker recorded before it went, with `part` as
    /// its `.part`, in a worker of boot "boot-now". Returns the file and the Range it asked for.
    func resume(part: Data, checkpointBoot: String?) async throws -> (file: Data, range: String?, record: JobRecord?) {
        try await withServer { server in
            try await withFolder { folder in
                let store = try SQLiteJobStore(path: folder.appendingPathComponent("jobs.sqlite").path)
                let files = folder.appendingPathComponent("files")
                try FileManager.default.createDirectory(at: files, withIntermediateDirectories: true)
                let path = "/bytes/\(Self.total)"
                // The worker before the power loss: claimed, checkpointed, gone (released here).
                let checkpoint = Checkpoint(bytes: Int64(Self.checkpointed), node: WorkerInfo.localNode, bootID: checkpointBoot)
                _ = try await store.enqueueAbandonedDownload(url: server.baseURL + path, destination: "f.bin", checkpoint: checkpoint)
                try part.write(to: files.appendingPathComponent("f.bin.part"))

                var configuration = DurableWorker.Configuration(folder: files)
                configuration.heartbeatInterval = .seconds(1)
                configuration.pollInterval = .milliseconds(100)
                configuration.bootID = "boot-now"
                let worker = DurableWorker(store: store, requestQueue: RequestQueue(maxConcurrentRequestCount: 1),
                                           configuration: configuration)
                worker.register(kind: "download") { [weak worker] _ in worker?.stop(drain: .seconds(30)) }
                try await worker.run()
                let range = server.requests.last { $0.path == path }?.headers.first { $0.name.lowercased() == "range" }?.value
                let record = try await store.jobs(JobFilter()).first
                return (try Data(contentsOf: files.appendingPathComponent("f.bin")), range, record)
            }
        }
    }

    static var expected: Data { Data(FixtureServer.expectedBytes(count: total)) }

    @Test func aPartFromAnotherBootIsTruncatedToItsCheckpointBeforeResuming() async throws {
        // The checkpointed bytes, then a tail the kernel never wrote back: zeros.
        let part = Self.expected.prefix(Self.checkpointed) + Data(repeating: 0, count: 30_000)
        let (file, range, record) = try await resume(part: part, checkpointBoot: "boot-before")
        #expect(range == "bytes=\(Self.checkpointed)-", "resumed from the checkpoint, not after the tail")
        #expect(file == Self.expected, "byte-identical")
        #expect(record?.state == .completed)
    }

    @Test func aPartFromThisBootIsResumedWhole() async throws {
        // A process killed in this boot: the page cache holds every byte it wrote, past the checkpoint.
        let part = Self.expected.prefix(150_000)
        let (file, range, _) = try await resume(part: part, checkpointBoot: "boot-now")
        #expect(range == "bytes=150000-", "nothing cut: the bytes past the checkpoint are good")
        #expect(file == Self.expected)
    }

    @Test func aShorterPartFromAnotherBootIsResumedFromWhereItIs() async throws {
        let part = Self.expected.prefix(60_000)
        let (file, range, _) = try await resume(part: part, checkpointBoot: "boot-before")
        #expect(range == "bytes=60000-")
        #expect(file == Self.expected)
    }

    @Test func aPartWhoseValidatorIsGoneAfterARebootIsDiscarded() async throws {
        try await withFolder { folder in
            var configuration = DurableWorker.Configuration(folder: folder)
            configuration.bootID = "boot-now"
            let worker = DurableWorker(store: try SQLiteJobStore(path: folder.appendingPathComponent("jobs.sqlite").path),
                                       requestQueue: RequestQueue(), configuration: configuration)
            let part = folder.appendingPathComponent("f.bin.part")
            try Data(count: 5000).write(to: part)  // no validator kept with it
            let checkpoint = Checkpoint(bytes: 4096, validator: "\"v1\"", node: configuration.node, bootID: "boot-before")
            #expect(worker.checkPartAfterReboot(part.path, checkpoint: checkpoint, job: 1) == .discarded)
            #expect(!FileManager.default.fileExists(atPath: part.path))
        }
    }

    /// No checkpoint of a boot (a download shorter than a heartbeat): the `.part`'s time decides.
    @Test func aPartWithNoCheckpointWrittenBeforeThisBootIsDiscardedAndOneOfThisBootKept() async throws {
        try await withFolder { folder in
            var configuration = DurableWorker.Configuration(folder: folder)
            configuration.bootID = "boot-now"
            let store = try SQLiteJobStore(path: folder.appendingPathComponent("jobs.sqlite").path)
            let part = folder.appendingPathComponent("f.bin.part")
            try Data(count: 5000).write(to: part)
            configuration.bootTime = Date().addingTimeInterval(-3600)  // booted before it was written
            var worker = DurableWorker(store: store, requestQueue: RequestQueue(), configuration: configuration)
            #expect(worker.checkPartAfterReboot(part.path, checkpoint: nil, job: 1) == .kept)
            let older = Checkpoint(bytes: 4096, validator: nil, node: configuration.node)  // recorded with no boot id
            #expect(worker.checkPartAfterReboot(part.path, checkpoint: older, job: 1) == .kept)
            #expect(FileManager.default.fileExists(atPath: part.path))
            configuration.bootTime = Date().addingTimeInterval(3600)  // booted after it was last written
            worker = DurableWorker(store: store, requestQueue: RequestQueue(), configuration: configuration)
            #expect(worker.checkPartAfterReboot(part.path, checkpoint: nil, job: 1) == .discarded)
            #expect(!FileManager.default.fileExists(atPath: part.path))
        }
    }

    @Test func heartbeatCheckpointsCarryTheBootAndTheValidator() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let store = try SQLiteJobStore(path: folder.appendingPathComponent("jobs.sqlite").path)
                let files = folder.appendingPathComponent("files")
                // Slow (16 KiB every 50 ms): still running when the heartbeat goes.
                _ = try await store.enqueue([JobSpec(kind: "download", request: JobRequest(
                    url: server.baseURL + "/bytes/\(4 << 20)?chunk=16384&drip=50&etag=v1", destination: "slow.bin"))],
                    queue: "default", order: .fifo)
                var configuration = DurableWorker.Configuration(folder: files)
                configuration.heartbeatInterval = .milliseconds(300)
                configuration.pollInterval = .milliseconds(100)
                configuration.bootID = "boot-now"
                let worker = DurableWorker(store: store, requestQueue: RequestQueue(maxConcurrentRequestCount: 1),
                                           configuration: configuration)
                worker.register(kind: "download") { _ in }
                let running = Task { try await worker.run() }
                try #require(await waitForFile(files.appendingPathComponent("slow.bin.part").path, atLeast: 64 << 10, timeout: 60))
                // Each heartbeat stores a checkpoint; the event awaited is one with bytes in it.
                var checkpoint: Checkpoint?
                for _ in 0..<200 where checkpoint.map({ $0.bytes == 0 }) ?? true {
                    checkpoint = try await store.jobs(JobFilter()).first?.checkpoint
                    // A heartbeat leaves no trace but the store's record: it is read again after
                    // each sleep, bounded at 20 s; the sleep IS the wait for the next heartbeat.
                    try await Task.sleep(for: .milliseconds(100))
                }
                worker.stop(drain: .milliseconds(100))
                try await running.value
                #expect(checkpoint?.bootID == "boot-now")
                #expect(checkpoint?.validator == "\"v1\"")
                #expect((checkpoint?.bytes ?? 0) > 0)
            }
        }
    }

    @Test func aCheckpointRecordedWithoutBootIDDecodes() throws {
        let old = Data(#"{"bytes":4096,"validator":"\"v1\"","node":"host-a"}"#.utf8)
        let checkpoint = try JSONDecoder().decode(Checkpoint.self, from: old)
        #expect(checkpoint == Checkpoint(bytes: 4096, validator: "\"v1\"", node: "host-a"))
        #expect(checkpoint.bootID == nil)
        let new = Checkpoint(bytes: 1, node: "host-a", bootID: "b")
        #expect(try JSONDecoder().decode(Checkpoint.self, from: JSONEncoder().encode(new)) == new)
    }
}
