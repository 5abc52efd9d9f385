import CCurl  // getxattr and setxattr (sys/xattr.h, through the shim)
import CurlQueue
@testable import CurlQueueDurable
import CurlQueueSQLite
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Synchronization
import Testing

/// A worker killed after the core renamed a finished download into place and before the store
/// recorded its outcome: the next attempt confirms the file with the server (`If-Range`, a
/// 416 for its length) instead of fetching it whole again, but only when its bytes are known
/// to be whole. A test cannot kill at that instant or reboot, so it leaves what such a worker
/// leaves (the file, its attributes, the job's checkpoint) and sets the worker's boot id.
@Suite struct DurableWorkerUnrecordedFileTests {
    static let total = 300_000
    static var expected: Data { Data(FixtureServer.expectedBytes(count: total)) }

    struct Run {
        var file: Data?
        var part: Bool
        var range: String?
        var ifRange: String?
        var bytesReceived: Int64?
        var record: JobRecord?
        var attributes: [String]
    }

    /// Runs one download job of `/bytes/total` (ETag `"v1"`) to `f.bin`, in a worker of boot
    /// "boot-now", after an earlier worker claimed it, recorded `checkpoint` and went without
    /// recording an outcome, leaving `file` at the destination with the given attributes
    /// (`$JOB` in a value: the job's id).
    func run(file: Data?, attributes: [String: String], checkpoint: Checkpoint? = nil) async throws -> Run {
        try await withServer { server in
            try await withFolder { folder in
                let store = try SQLiteJobStore(path: folder.appendingPathComponent("jobs.sqlite").path)
                let files = folder.appendingPathComponent("files")
                try FileManager.default.createDirectory(at: files, withIntermediateDirectories: true)
                let path = "/bytes/\(Self.total)"
                let job = try await store.enqueueAbandonedDownload(
                    url: server.baseURL + path + "?etag=v1", destination: "f.bin", checkpoint: checkpoint)
                let destination = files.appendingPathComponent("f.bin")
                if let file {
                    try file.write(to: destination)
                    for (name, value) in attributes {
                        let value = value.replacingOccurrences(of: "$JOB", with: "\(job)")
                        #expect(setxattr(destination.path, name, value, value.utf8.count, 0) == 0)
                    }
                }

                var configuration = DurableWorker.Configuration.forTests(files)
                configuration.bootID = "boot-now"
                let worker = DurableWorker(store: store, requestQueue: RequestQueue(maxConcurrentRequestCount: 1),
                                           configuration: configuration)
                let received = Mutex<Int64?>(nil)
                worker.register(kind: "download") { [weak worker] job in
                    received.withLock { $0 = job.response?.metrics.bytesReceived }
                    worker?.stop(drain: .seconds(30))
                }
                try await worker.run()
                let request = server.requests.last { $0.path == path }
                func header(_ name: String) -> String? { request?.headers.first { $0.name.lowercased() == name }?.value }
                return Run(
                    file: try? Data(contentsOf: destination),
                    part: FileManager.default.fileExists(atPath: destination.path + ".part"),
                    range: header("range"), ifRange: header("if-range"),
                    bytesReceived: received.withLock { $0 },
                    record: try await store.jobs(JobFilter()).first,
                    attributes: Self.attributeNames(destination.path))
            }
        }
    }

    static func attributeNames(_ path: String) -> [String] {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = listxattr(path, &buffer, buffer.count)
        guard count > 0 else { return [] }
        return buffer[..<count].split(separator: 0).map { String(decoding: $0.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
    }

    static let validator = "user.curlqueue.validator"
    static let finished = "user.curlqueue.finished"

    @Test func aFileFinishedInThisBootIsConfirmedNotFetchedAgain() async throws {
        let run = try await run(file: Self.expected, attributes: [Self.validator: "\"v1\"", Self.finished: "boot-now $JOB"])
        #expect(run.range == "bytes=\(Self.total)-", "asked only for what lies past the file's end")
        #expect(run.ifRange == "\"v1\"")
        #expect((run.bytesReceived ?? .max) < 1024, "the 416's text only, \(String(describing: run.bytesReceived)) bytes")
        #expect(run.file == Self.expected)
        #expect(!run.part)
        #expect(run.record?.state == .completed)
        #expect(run.record?.outcome == .completed(JobResult(status: 200, bytes: Int64(Self.total), file: "f.bin")))
        #expect(run.attributes.isEmpty, "the recorded file carries no attribute of ours: \(run.attributes)")
    }

    @Test func anUnmarkedFileIsCheckedAsGetChecksAFileAlreadyThere() async throws {
        // A checkpoint vouches for the job's `.part`, not for whatever stands at its destination:
        // a file with no mark of this job is nobody's to replace; the size a HEAD announces
        // says it is whole (curlq get's rule), so the job is done with nothing fetched.
        let checkpoint = Checkpoint(bytes: 100_000, validator: "\"v1\"", node: WorkerInfo.localNode, bootID: "boot-now")
        let run = try await run(file: Self.expected, attributes: [Self.validator: "\"v1\""], checkpoint: checkpoint)
        #expect(run.range == nil)
        #expect(run.bytesReceived == nil, "no GET")
        #expect(run.file == Self.expected)
        #expect(run.record?.outcome == .completed(JobResult(status: 0, bytes: Int64(Self.total), file: "f.bin", alreadyThere: true)))
    }

    @Test func aFileFinishedInAnotherBootIsFetchedWhole() async throws {
        // A power loss may have come between its writes and the disk: its bytes are not trusted.
        var damaged = Self.expected
        damaged[Self.total - 10] ^= 0xFF
        let run = try await run(file: damaged, attributes: [Self.validator: "\"v1\"", Self.finished: "boot-before $JOB"])
        #expect(run.range == nil, "no resume: \(run.range ?? "")")
        #expect(run.bytesReceived == Int64(Self.total))
        #expect(run.file == Self.expected)
        #expect(run.attributes.isEmpty)
    }

    @Test func anotherJobsFileIsNotTaken() async throws {
        // Another job with this destination, marked in this boot: its file, not this job's, so
        // never replaced; whole by the size the server announces, this job is done with it.
        let run = try await run(file: Self.expected, attributes: [Self.validator: "\"v1\"", Self.finished: "boot-now 999999"])
        #expect(run.range == nil)
        #expect(run.bytesReceived == nil, "no GET")
        #expect(run.file == Self.expected)
        #expect(run.record?.outcome == .completed(JobResult(status: 0, bytes: Int64(Self.total), file: "f.bin", alreadyThere: true)))
    }

    @Test func anotherFileOfAnotherSizeIsNeverReplaced() async throws {
        // What the issue found: a job replaced a 1 MiB file with its 100 KiB. Now it fails and the file stays.
        let run = try await run(file: Data("the user's own bytes".utf8), attributes: [:])
        #expect(run.bytesReceived == nil, "no GET")
        #expect(run.file == Data("the user's own bytes".utf8))
        #expect(run.record?.state == .failed)
        #expect(run.record?.outcome?.failureKind == .existingFile)
    }

    @Test func aFileWithoutAValidatorIsNotTakenForOne() async throws {
        // A server that sent no validator: nothing for If-Range; replaced by the download.
        let run = try await run(file: Data("other bytes".utf8), attributes: [Self.finished: "boot-now $JOB"])
        #expect(run.range == nil)
        #expect(run.file == Self.expected)
        #expect(run.record?.state == .completed)
    }

    @Test func aFileWhoseResourceChangedComesWhole() async throws {
        // Finished in this boot with validator "v0"; the server's is now "v1": a 200, whole.
        var old = Self.expected
        old[5] ^= 0xFF
        let run = try await run(file: old, attributes: [Self.validator: "\"v0\"", Self.finished: "boot-now $JOB"])
        #expect(run.range == "bytes=\(Self.total)-")
        #expect(run.ifRange == "\"v0\"")
        #expect(run.bytesReceived == Int64(Self.total), "the new version, whole")
        #expect(run.file == Self.expected, "no byte of the old version stays")
        #expect(run.attributes.isEmpty)
    }

    /// What stands at the destination is never taken when it is not a marked regular file of
    /// its own with no `.part` beside it: the worker's check, called as a claim calls it.
    @Test func onlyAMarkedFileOfItsOwnWithNoPartIsTaken() async throws {
        try await withFolder { folder in
            var configuration = DurableWorker.Configuration(folder: folder)
            configuration.bootID = "boot-now"
            let worker = DurableWorker(store: try SQLiteJobStore(path: folder.appendingPathComponent("jobs.sqlite").path),
                                       requestQueue: RequestQueue(), configuration: configuration)
            func marked(_ name: String) throws -> URL {
                let url = folder.appendingPathComponent(name)
                try Data("whole".utf8).write(to: url)
                for (attribute, value) in [(Self.validator, "\"v1\""), (Self.finished, "boot-now 7")] {
                    #expect(setxattr(url.path, attribute, value, value.utf8.count, 0) == 0)
                }
                return url
            }
            // A `.part` already there (another attempt's bytes): neither is touched.
            let withPart = try marked("a.bin")
            try Data("part".utf8).write(to: part(withPart))
            #expect(!worker.reclaimUnrecordedFile(withPart.path, job: 7))
            #expect(try Data(contentsOf: part(withPart)) == Data("part".utf8))
            #expect(FileManager.default.fileExists(atPath: withPart.path))
            // A symbolic link to a marked file: not followed.
            let target = try marked("target.bin")
            let link = folder.appendingPathComponent("link.bin")
            try FileManager.default.createSymbolicLink(at: link, withDestinationURL: target)
            #expect(!worker.reclaimUnrecordedFile(link.path, job: 7))
            #expect(!FileManager.default.fileExists(atPath: part(link).path))
            // A file with a second name elsewhere: its `.part` could write through to that name.
            let linked = try marked("linked.bin")
            #expect(Glibc.link(linked.path, folder.appendingPathComponent("elsewhere").path) == 0)
            #expect(!worker.reclaimUnrecordedFile(linked.path, job: 7))
            // The marked file of job 7, alone: taken, mark gone, validator kept for If-Range.
            let mine = try marked("mine.bin")
            #expect(!worker.reclaimUnrecordedFile(mine.path, job: 8), "another job's")
            #expect(worker.reclaimUnrecordedFile(mine.path, job: 7))
            #expect(!FileManager.default.fileExists(atPath: mine.path))
            #expect(Self.attributeNames(part(mine).path) == [Self.validator])
        }
    }

    @Test func aFreshDownloadEndsWithNoAttributeOnItsFile() async throws {
        let run = try await run(file: nil, attributes: [:])
        #expect(run.range == nil)
        #expect(run.file == Self.expected)
        #expect(run.record?.state == .completed)
        #expect(run.attributes.isEmpty, "\(run.attributes)")
    }

    @Test func aFinishedFileCarriesItsValidatorAndMarkOnlyUntilItsOutcomeIsRecorded() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let store = FinishGatedStore(try SQLiteJobStore(path: folder.appendingPathComponent("jobs.sqlite").path))
                let files = folder.appendingPathComponent("files")
                _ = try await store.enqueue(
                    [JobSpec(kind: "download", request: JobRequest(url: server.baseURL + "/bytes/\(Self.total)?etag=v1", destination: "f.bin"))],
                    queue: "default", order: .fifo)
                var configuration = DurableWorker.Configuration.forTests(files)
                configuration.bootID = "boot-now"
                let worker = DurableWorker(store: store, requestQueue: RequestQueue(), configuration: configuration)
                worker.register(kind: "download") { [weak worker] _ in worker?.stop(drain: .seconds(30)) }
                let running = Task { try await worker.run() }
                var entered = store.entered.makeAsyncIterator()
                _ = await entered.next()
                // The window a kill -9 may hit: renamed into place, flushed, not yet recorded.
                let path = files.appendingPathComponent("f.bin").path
                let job = try #require(try await store.jobs(JobFilter()).first).id
                var value = [UInt8](repeating: 0, count: 64)
                let count = getxattr(path, Self.finished, &value, value.count)
                #expect(count > 0 && String(decoding: value.prefix(max(count, 0)), as: UTF8.self) == "boot-now \(job)")
                #expect(Set(Self.attributeNames(path)) == [Self.validator, Self.finished])
                store.proceed.yield()
                try await running.value
                #expect(try Data(contentsOf: files.appendingPathComponent("f.bin")) == Self.expected)
                #expect(Self.attributeNames(path).isEmpty, "\(Self.attributeNames(path))")
            }
        }
    }
}

/// The SQLite store, whose `finish` waits until the test lets it go on: the moment between a
/// download's rename and its record, held open.
final class FinishGatedStore: JobStore {
    let store: SQLiteJobStore
    let entered: AsyncStream<Void>
    private let enteredContinuation: AsyncStream<Void>.Continuation
    private let gate: AsyncStream<Void>
    let proceed: AsyncStream<Void>.Continuation

    init(_ store: SQLiteJobStore) {
        self.store = store
        (entered, enteredContinuation) = AsyncStream.makeStream()
        (gate, proceed) = AsyncStream.makeStream()
    }

    func finish(_ lease: Lease, _ outcome: JobOutcome) async throws -> Bool {
        enteredContinuation.yield()
        var waiting = gate.makeAsyncIterator()
        _ = await waiting.next()
        return try await store.finish(lease, outcome)
    }

    func enqueue(_ specs: [JobSpec], queue: String, order: JobOrder) async throws -> [EnqueueResult] {
        try await store.enqueue(specs, queue: queue, order: order)
    }
    func register(_ worker: WorkerInfo) async throws { try await store.register(worker) }
    func claim(queue: String, kinds: Set<String>, limit: Int, worker: WorkerInfo.ID) async throws -> [ClaimedJob] {
        try await store.claim(queue: queue, kinds: kinds, limit: limit, worker: worker)
    }
    func heartbeat(_ worker: WorkerInfo.ID, checkpoints: [JobID: Checkpoint]) async throws -> HeartbeatReply {
        try await store.heartbeat(worker, checkpoints: checkpoints)
    }
    func markHandled(_ lease: Lease) async throws -> Bool { try await store.markHandled(lease) }
    func release(_ leases: [Lease]) async throws { try await store.release(leases) }
    func release(_ jobs: Set<JobID>, heldBy worker: WorkerInfo.ID) async throws { try await store.release(jobs, heldBy: worker) }
    func unregister(_ worker: WorkerInfo.ID) async throws { try await store.unregister(worker) }
    func cancel(_ selector: JobSelector) async throws -> CancelResult { try await store.cancel(selector) }
    func removeFinished(_ ids: Set<JobID>?, queue: String) async throws -> [JobID] { try await store.removeFinished(ids, queue: queue) }
    func setPaused(_ paused: Bool, queue: String) async throws { try await store.setPaused(paused, queue: queue) }
    func jobs(_ filter: JobFilter) async throws -> [JobRecord] { try await store.jobs(filter) }
    func counts(queue: String?) async throws -> [JobState: Int] { try await store.counts(queue: queue) }
    func health(queue: String) async throws -> StoreHealth { try await store.health(queue: queue) }
    func maintain() async throws -> MaintenanceReport { try await store.maintain() }
    func wakeups(queue: String) -> AsyncStream<Void> { store.wakeups(queue: queue) }
}
