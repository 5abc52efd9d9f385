import CurlQueue
import CurlQueueDurable
import CurlQueueSQLite
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing

/// A worker in this process against the fixture server: Retry-After in the store's schedule,
/// and jobs the store says the worker holds but it never heard of.
@Suite struct DurableWorkerGapsTests {
    @Test func aRetryAfterSchedulesTheNextAttemptNoEarlierThanItSays() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let store = try SQLiteJobStore(path: folder.appendingPathComponent("jobs.sqlite").path)
                // A backoff of 50 ms: without Retry-After the retry would come at once.
                let retry = JobRetryPolicy(maxAttempts: 3, initialBackoff: 0.05, jitter: 0, maxRetryAfter: 60)
                let specs = [
                    JobSpec(kind: "download", request: JobRequest(url: server.baseURL + "/flaky/ra-seconds?failures=1&status=503&retryAfter=2"),
                            retry: retry),
                    JobSpec(kind: "download", request: JobRequest(url: server.baseURL + "/flaky/ra-date?failures=1&status=429&retryAfterDate=3"),
                            retry: retry),
                    // Asks for longer than maxRetryAfter: no retry, the 503 is the outcome (as in memory).
                    JobSpec(kind: "download", request: JobRequest(url: server.baseURL + "/flaky/ra-long?failures=1&status=503&retryAfter=3600"),
                            retry: retry),
                ]
                let ids = try await store.enqueue(specs, queue: "default", order: .fifo).map(\.id)
                let worker = DurableWorker(store: store, requestQueue: RequestQueue(maxConcurrentRequestCount: 4),
                                           configuration: .forTests(folder.appendingPathComponent("files")))
                let handled = Locked<Set<JobID>>([])
                worker.register(kind: "download") { [weak worker] job in
                    let count = handled.withLock { $0.insert(job.record.id); return $0.count }
                    if count == 3 { worker?.stop(drain: .seconds(30)) }
                }
                try await worker.run()
                let records = Dictionary(uniqueKeysWithValues: try await store.jobs(JobFilter()).map { ($0.id, $0) })
                for (id, name, asked) in [(ids[0], "ra-seconds", 2.0), (ids[1], "ra-date", 2.0)] {
                    guard case .completed(let result)? = records[id]?.outcome else {
                        Issue.record("\(name): \(String(describing: records[id]))")
                        continue
                    }
                    #expect(result.status == 200 && records[id]?.attempt == 2)
                    let arrivals = server.requests.filter { $0.path == "/flaky/\(name)" }.map(\.arrival).sorted()
                    #expect(arrivals.count == 2)
                    guard arrivals.count == 2 else { continue }
                    // An HTTP-date has whole seconds: 3 s from now is at least 2 s from the first answer.
                    let gap = arrivals[1] - arrivals[0]
                    #expect(gap >= .seconds(asked), "\(name): the retry came \(gap) after the 503, before its Retry-After")
                }
                #expect(records[ids[2]]?.outcome == .failed(reason: "HTTP 503 Service Unavailable", kind: .http)
                        && records[ids[2]]?.attempt == 1, "longer than maxRetryAfter: not retried, failed")
            }
        }
    }

    @Test func aDownloadWhoseChecksumDiffersFailsItsAttemptsAndLeavesNoFile() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let store = try SQLiteJobStore(path: folder.appendingPathComponent("jobs.sqlite").path)
                let files = folder.appendingPathComponent("files")
                let retry = JobRetryPolicy(maxAttempts: 2, initialBackoff: 0.05, jitter: 0)
                let good = FileDigests.hex(.sha256, of: FixtureServer.expectedBytes(count: 5000))
                let goodMD5 = FileDigests.hex(.md5, of: FixtureServer.expectedBytes(count: 7000))
                let specs = [
                    JobSpec(kind: "download", request: JobRequest(url: server.baseURL + "/bytes/5000", destination: "good.bin",
                                                                  checksum: .init(algorithm: "sha256", hex: good.uppercased())),
                            retry: retry),
                    JobSpec(kind: "download", request: JobRequest(url: server.baseURL + "/bytes/3000", destination: "bad.bin",
                                                                  checksum: .init(algorithm: "sha256", hex: String(repeating: "0", count: 64))),
                            retry: retry),
                    JobSpec(kind: "download", request: JobRequest(url: server.baseURL + "/bytes/7000", destination: "md5.bin",
                                                                  checksum: .init(algorithm: "md5", hex: goodMD5)),
                            retry: retry),
                ]
                let ids = try await store.enqueue(specs, queue: "default", order: .fifo).map(\.id)
                // Every name that appears in the folder, as inotify reports it: an unverified
                // download must never take its final name, not even for a moment.
                try FileManager.default.createDirectory(at: files, withIntermediateDirectories: true)
                let watch = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
                #expect(watch >= 0 && inotify_add_watch(watch, files.path, UInt32(IN_CREATE | IN_MOVED_TO)) >= 0)
                defer { close(watch) }
                let worker = DurableWorker(store: store, requestQueue: RequestQueue(maxConcurrentRequestCount: 4),
                                           configuration: .forTests(files))
                let handled = Locked<Set<JobID>>([])
                worker.register(kind: "download") { [weak worker] job in
                    let count = handled.withLock { $0.insert(job.record.id); return $0.count }
                    if count == 3 { worker?.stop(drain: .seconds(30)) }
                }
                try await worker.run()
                let records = Dictionary(uniqueKeysWithValues: try await store.jobs(JobFilter()).map { ($0.id, $0) })
                #expect(records[ids[0]]?.state == .completed && records[ids[2]]?.state == .completed)
                #expect(try Data(contentsOf: files.appendingPathComponent("good.bin")) == Data(FixtureServer.expectedBytes(count: 5000)))
                #expect(records[ids[1]]?.state == .failed && records[ids[1]]?.attempt == 2, "retried, then failed")
                #expect(records[ids[1]]?.lastError?.hasPrefix("sha256 mismatch") == true, "\(records[ids[1]]?.lastError ?? "")")
                #expect(server.requests.filter { $0.path == "/bytes/3000" }.count == 2)
                let left = try FileManager.default.contentsOfDirectory(atPath: files.path).sorted()
                #expect(left == ["good.bin", "md5.bin"], "no file with the wrong bytes under its final name, no .part")
                var appeared: Set<String> = []
                var buffer = [UInt8](repeating: 0, count: 65536)
                while true {
                    let count = buffer.withUnsafeMutableBytes { read(watch, $0.baseAddress, $0.count) }
                    guard count > 0 else { break }
                    var offset = 0
                    while offset < count {
                        let length = buffer.withUnsafeBytes { Int($0.load(fromByteOffset: offset + 12, as: UInt32.self)) }
                        let name = buffer[(offset + 16)..<(offset + 16 + length)].prefix { $0 != 0 }
                        appeared.insert(String(decoding: name, as: UTF8.self))
                        offset += 16 + length
                    }
                }
                #expect(!appeared.contains("bad.bin"), "the mismatching bytes stood under the final name: \(appeared.sorted())")
                #expect(appeared.contains("bad.bin.unverified"), "\(appeared.sorted())")
            }
        }
    }

    @Test func enqueueRefusesABadChecksum() async throws {
        let store = try SQLiteJobStore(path: FileManager.default.temporaryDirectory.appendingPathComponent("cq-\(UUID()).sqlite").path)
        defer { try? FileManager.default.removeItem(atPath: store.path) }
        for checksum in [JobRequest.Checksum(algorithm: "sha3", hex: "00"), .init(algorithm: "sha256", hex: "xyz")] {
            await #expect(throws: JobSpecError.self) {
                try await store.enqueue([JobSpec(kind: "k", request: JobRequest(url: "http://127.0.0.1:9/a", destination: "a",
                                                                                   checksum: checksum))], queue: "q", order: .fifo)
            }
        }
        await #expect(throws: JobSpecError.self, "a checksum needs a destination") {
            try await store.enqueue([JobSpec(kind: "k", request: JobRequest(url: "http://127.0.0.1:9/a",
                                                                               checksum: .init(algorithm: "md5", hex: String(repeating: "a", count: 32))))],
                                    queue: "q", order: .fifo)
        }
    }

    @Test func jobsClaimedOnTheWorkersIdWhoseReplyWasLostAreGivenBack() async throws {
        try await withFolder { folder in
            let path = folder.appendingPathComponent("jobs.sqlite").path
            let store = try SQLiteJobStore(path: path)
            // Of a kind this worker does not run: once given back they stay available.
            let ids = try await store.enqueue(
                [JobSpec(kind: "elsewhere", request: JobRequest(url: "http://127.0.0.1:9/a")),
                 JobSpec(kind: "elsewhere", request: JobRequest(url: "http://127.0.0.1:9/b"))],
                queue: "default", order: .fifo
            ).map(\.id)
            let worker = DurableWorker(store: store, requestQueue: RequestQueue(maxConcurrentRequestCount: 2),
                                       configuration: .forTests(folder.appendingPathComponent("files")))
            worker.register(kind: "download") { _ in }
            let running = Task { try await worker.run() }
            defer { worker.stop(drain: .zero) }
            // The claim of a worker whose reply never arrived: made on its id from another
            // handle (another connection), once the worker has registered.
            let outside = try SQLiteJobStore(path: path)
            var lost: [ClaimedJob] = []
            for _ in 0..<500 {  // bounded: 10 s for the worker to register
                if let claimed = try? await outside.claim(queue: "default", kinds: ["elsewhere"], limit: 2, worker: worker.info.id) {
                    lost = claimed
                    break
                }
                try await Task.sleep(for: .milliseconds(20))  // the sleep IS the poll for the registration
            }
            #expect(lost.map(\.lease.job) == ids)
            let claimedAt = ContinuousClock.now
            var records: [JobRecord] = []
            for _ in 0..<1500 {  // bounded: 30 s
                records = try await store.jobs(JobFilter())
                if records.allSatisfy({ $0.state == .available }) { break }
                try await Task.sleep(for: .milliseconds(20))  // the sleep IS the poll of the store
            }
            let elapsed = ContinuousClock.now - claimedAt
            #expect(records.map(\.state) == [.available, .available], "given back, in \(elapsed)")
            #expect(records.allSatisfy { $0.attempt == 0 && $0.worker == nil }, "not counted as an attempt")
            // Within a heartbeat or two (1 s each), with room for a loaded machine and TSan; the
            // worker's TTL is 60 s, and without the check it renews the lease for ever.
            #expect(elapsed < .seconds(20))
            #expect(try await store.finish(lost[0].lease, .completed(JobResult(status: 200, bytes: 0))) == false)
            worker.stop(drain: .zero)
            try await running.value
        }
    }
}
