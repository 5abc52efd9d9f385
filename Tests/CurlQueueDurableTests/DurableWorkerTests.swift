import CurlQueue
import CurlQueueDurable
import CurlQueueSQLite
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// A worker in this process, on an SQLite store, against the fixture server.
@Suite struct DurableWorkerTests {
    @Test func runsJobsAndHandsEachOutcomeToItsHandler() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let store = try SQLiteJobStore(path: folder.appendingPathComponent("jobs.sqlite").path)
                let specs = [
                    JobSpec(kind: "download", request: JobRequest(url: server.baseURL + "/bytes/1000", destination: "a/one.bin")),
                    JobSpec(kind: "download", request: JobRequest(url: server.baseURL + "/bytes/70000")),
                    JobSpec(kind: "download", request: JobRequest(url: server.baseURL + "/status/404")),
                ]
                let ids = try await store.enqueue(specs, queue: "default", order: .fifo).map(\.id)
                let worker = DurableWorker(store: store, requestQueue: RequestQueue(maxConcurrentRequestCount: 2),
                                           configuration: .forTests(folder.appendingPathComponent("files")))
                let seen = Locked<[JobID: DurableJob]>([:])
                // Weakly: the worker keeps its handlers, and a strong capture would keep the
                // worker (its store, queue and results) for ever, as LeakSanitizer reported.
                worker.register(kind: "download") { [weak worker] job in
                    let count = seen.withLock { seen in
                        seen[job.record.id] = job
                        return seen.count
                    }
                    if count == 3 { worker?.stop(drain: .seconds(30)) }  // this handler returns well within it
                }
                try await worker.run()
                let jobs = seen.withLock { $0 }
                #expect(Set(jobs.keys) == Set(ids))
                let file = folder.appendingPathComponent("files/a/one.bin")
                #expect(jobs[ids[0]]?.fileURL == file)
                #expect(try Data(contentsOf: file) == Data(FixtureServer.expectedBytes(count: 1000)))
                #expect(jobs[ids[1]]?.response?.body.count == 70000)
                // Only a 2xx completes, as curlq get decides; the handler still sees the response.
                #expect(jobs[ids[2]]?.outcome == .failed(reason: "HTTP 404 Not Found", kind: .http))
                #expect(jobs[ids[2]]?.response?.status.code == 404)
                let records = try await store.jobs(JobFilter()).sorted { $0.id < $1.id }
                #expect(records.map(\.state) == [.completed, .completed, .failed] && records.allSatisfy(\.handled))
            }
        }
    }

    @Test func stopReleasesUnfinishedJobsWithTheirPartFilesKept() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let store = try SQLiteJobStore(path: folder.appendingPathComponent("jobs.sqlite").path)
                let files = folder.appendingPathComponent("files")
                // Slow: 16 KiB every 50 ms, so none finishes before the stop.
                let specs = (0..<3).map { index in
                    JobSpec(kind: "download", request: JobRequest(
                        url: server.baseURL + "/bytes/\(4 << 20)?chunk=16384&drip=50&n=\(index)", destination: "f\(index)"))
                }
                _ = try await store.enqueue(specs, queue: "default", order: .fifo)
                let worker = DurableWorker(store: store, requestQueue: RequestQueue(maxConcurrentRequestCount: 2),
                                           configuration: .forTests(files))
                worker.register(kind: "download") { _ in }
                let running = Task { try await worker.run() }
                // Wait for bytes on disk, then stop with a short drain.
                let started = await waitForFolder(files) { names(in: files).filter { $0.hasSuffix(".part") }.count == 2 }
                #expect(started)
                worker.stop(drain: .milliseconds(200))
                try await running.value
                let records = try await store.jobs(JobFilter())
                #expect(records.allSatisfy { $0.state == .available && $0.attempt == 0 }, "released, not counted")
                #expect(records.filter { $0.checkpoint != nil }.count <= 2)
                let parts = try FileManager.default.contentsOfDirectory(atPath: files.path).filter { $0.hasSuffix(".part") }
                #expect(parts.count == 2, "kept for the resume")
                #expect(try await store.counts(queue: nil)[.running] == nil, "no job left running")
            }
        }
    }
}
