import CurlQueue
@testable import CurlQueueDurable
import CurlQueueSQLite
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// A job's folders under the worker's are made one at a time and never through a symbolic
/// link: a link planted at `sub` cannot take `sub/f.bin` outside the worker's folder.
@Suite struct DurableWorkerFolderTests {
    struct Run {
        var record: JobRecord?
        /// What is in the folder beside the worker's, after the run.
        var outside: [String]
        /// The file at the destination under the worker's folder.
        var file: Data?
    }

    /// Runs one download job to `destination`, after `prepare(files, outside)`.
    func run(_ destination: String, prepare: (URL, URL) throws -> Void = { _, _ in }) async throws -> Run {
        try await withServer { server in
            try await withFolder { folder in
                let store = try SQLiteJobStore(path: folder.appendingPathComponent("jobs.sqlite").path)
                let files = folder.appendingPathComponent("files"), outside = folder.appendingPathComponent("outside")
                try FileManager.default.createDirectory(at: files, withIntermediateDirectories: true)
                try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
                try prepare(files, outside)
                let request = JobRequest(url: server.url("/bytes/1000").absoluteString, destination: destination)
                _ = try await store.enqueue([JobSpec(kind: "download", request: request)], queue: "default", order: .fifo)
                let worker = DurableWorker(store: store, requestQueue: RequestQueue(maxConcurrentRequestCount: 1),
                                           configuration: .forTests(files))
                worker.register(kind: "download") { [weak worker] _ in worker?.stop(drain: .seconds(30)) }
                try await worker.run()
                return Run(record: try await store.jobs(JobFilter()).first,
                           outside: try FileManager.default.contentsOfDirectory(atPath: outside.path),
                           file: try? Data(contentsOf: files.appendingPathComponent(destination)))
            }
        }
    }

    @Test func aSymbolicLinkOnTheWayFailsTheJobAndNothingIsWrittenOutside() async throws {
        let run = try await run("sub/f.bin") { files, outside in
            try FileManager.default.createSymbolicLink(at: files.appendingPathComponent("sub"), withDestinationURL: outside)
        }
        #expect(run.outside.isEmpty, "\(run.outside)")
        #expect(run.record?.state == .failed)
        #expect(run.record?.outcome?.failureKind == .file)
        if case .failed(let reason, _)? = run.record?.outcome {
            #expect(reason.contains("is a symbolic link"), "\(reason)")
        }
    }

    @Test func nestedFoldersAreMadeAndTheFileLands() async throws {
        let run = try await run("a/b/f.bin")
        #expect(run.record?.state == .completed)
        #expect(run.file == Data(FixtureServer.expectedBytes(count: 1000)))
    }
}
