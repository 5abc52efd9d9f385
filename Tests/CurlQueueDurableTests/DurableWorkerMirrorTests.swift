import CCurl  // getxattr and setxattr (sys/xattr.h, through the shim)
import CurlQueue
@testable import CurlQueueDurable
import CurlQueueSQLite
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// A durable job with mirrors (``JobRequest/mirrors``), as `curlq get` runs a line of
/// TAB-separated URLs: each attempt goes to the next server, at once while the list lasts; a
/// `.part` is resumed only from the server that wrote it.
@Suite struct DurableWorkerMirrorTests {
    static let total = 200_000
    static var expected: Data { Data(FixtureServer.expectedBytes(count: total)) }
    static let source = "user.curlq.source"
    static let validator = "user.curlqueue.validator"

    struct Run {
        var record: JobRecord?
        var file: Data?
        /// The fixture's requests for the job's paths, in order.
        var requests: [RecordedRequest]
        var seconds: Double
    }

    /// Runs one download job of `urls` (paths on the fixture; the first is the job's URL) to
    /// `f.bin`, with `part` (bytes and attributes) left beside it, until its handler runs.
    func run(
        _ paths: [String], attempts: Int, checksum: JobRequest.Checksum? = nil,
        part: (Data, [String: String])? = nil
    ) async throws -> Run {
        try await withServer { server in
            try await withFolder { folder in
                let store = try SQLiteJobStore(path: folder.appendingPathComponent("jobs.sqlite").path)
                let files = folder.appendingPathComponent("files")
                try FileManager.default.createDirectory(at: files, withIntermediateDirectories: true)
                let urls = paths.map { server.baseURL + $0 }
                // A backoff of ten minutes: a retry that is not "at once" never comes in the test.
                let retry = JobRetryPolicy(maxAttempts: attempts, initialBackoff: 600, maxBackoff: 600, jitter: 0)
                let request = JobRequest(url: urls[0], destination: "f.bin", checksum: checksum, mirrors: Array(urls.dropFirst()))
                _ = try await store.enqueue([JobSpec(kind: "download", request: request, retry: retry)], queue: "default", order: .fifo)
                if let (bytes, attributes) = part {
                    // With a checksum the download is staged as `f.bin.unverified` (get's rule).
                    let path = files.appendingPathComponent(checksum == nil ? "f.bin.part" : "f.bin.unverified.part").path
                    try bytes.write(to: URL(fileURLWithPath: path))
                    for (name, value) in attributes {
                        let value = value.replacingOccurrences(of: "$URL2", with: urls[1])
                        #expect(setxattr(path, name, value, value.utf8.count, 0) == 0)
                    }
                }
                let worker = DurableWorker(store: store, requestQueue: RequestQueue(maxConcurrentRequestCount: 1),
                                           configuration: .forTests(files))
                worker.register(kind: "download") { [weak worker] _ in worker?.stop(drain: .seconds(30)) }
                let started = ContinuousClock.now
                try await worker.run()
                let wanted = Set(paths.map { String($0.prefix { $0 != "?" }) })
                return Run(
                    record: try await store.jobs(JobFilter()).first,
                    file: try? Data(contentsOf: files.appendingPathComponent("f.bin")),
                    requests: server.requests.filter { wanted.contains($0.path) },
                    seconds: (ContinuousClock.now - started).seconds)
            }
        }
    }

    static func header(_ request: RecordedRequest?, _ name: String) -> String? {
        request?.headers.first { $0.name.lowercased() == name }?.value
    }

    @Test func aFileTheFirstServerLacksComesFromTheNextAtOnce() async throws {
        let run = try await run(["/status/404", "/bytes/\(Self.total)?etag=v1"], attempts: 2)
        #expect(run.record?.state == .completed, "\(String(describing: run.record?.outcome))")
        #expect(run.record?.attempt == 2)
        #expect(run.requests.map(\.path) == ["/status/404", "/bytes/\(Self.total)"])
        #expect(run.file == Self.expected)
        #expect(run.seconds < 300, "the second server was tried at once, not after the backoff")
    }

    @Test func theLastServerFailingEndsTheJobWithWhichURLItWas() async throws {
        let run = try await run(["/status/404", "/status/410"], attempts: 2)
        #expect(run.record?.state == .failed)
        #expect(run.record?.attempt == 2)
        guard case .failed(let reason, _)? = run.record?.outcome else {
            Issue.record("not failed: \(String(describing: run.record?.outcome))")
            return
        }
        #expect(reason.contains("(URL 2 of 2)"), "\(reason)")
    }

    @Test func aPartAnotherServerWroteIsNotResumedHere() async throws {
        // Bytes that are not the file's, with a validator this server would accept: resumed
        // with `If-Range`, they would stay at the file's start. They came from the other
        // mirror, so without a checksum they go and the file comes whole.
        let garbage = Data(repeating: 0x58, count: 50_000)
        let run = try await run(
            ["/bytes/\(Self.total)?etag=v1", "/bytes/\(Self.total)?etag=v1&mirror=2"], attempts: 2,
            part: (garbage, [Self.validator: "\"v1\"", Self.source: "$URL2"]))
        #expect(run.record?.state == .completed)
        #expect(run.requests.count == 1)
        #expect(Self.header(run.requests.first, "range") == nil, "not resumed")
        #expect(run.file == Self.expected)
    }

    @Test func withAChecksumAPartFromAnotherServerIsResumedWithoutItsValidatorAndChecked() async throws {
        // The checksum decides instead of `If-Range`: the resumed file does not match, is
        // deleted, and the next server's whole file does.
        let garbage = Data(repeating: 0x58, count: 50_000)
        let digest = SHA256.hex(of: Self.expected)
        let run = try await run(
            ["/bytes/\(Self.total)?etag=v1", "/bytes/\(Self.total)?etag=v1&mirror=2"], attempts: 3,
            checksum: .init(algorithm: "sha256", hex: digest),
            part: (garbage, [Self.validator: "\"v1\"", Self.source: "$URL2"]))
        #expect(run.record?.state == .completed, "\(String(describing: run.record?.outcome))")
        #expect(run.requests.count == 2)
        #expect(Self.header(run.requests.first, "range") == "bytes=50000-")
        #expect(Self.header(run.requests.first, "if-range") == nil, "another server's validator proves nothing here")
        #expect(Self.header(run.requests.last, "range") == nil)
        #expect(run.file == Self.expected)
    }

    @Test func aPartItsOwnServerWroteIsResumedAndMarkedByTheCore() async throws {
        // The `.part` of an attempt to the first server, marked by the core when it opened it.
        let start = Data(FixtureServer.expectedBytes(count: 50_000))
        let run = try await run(
            ["/bytes/\(Self.total)?etag=v1", "/bytes/\(Self.total)?etag=v1&mirror=2"], attempts: 2,
            part: (start, [Self.validator: "\"v1\""]))
        #expect(run.record?.state == .completed)
        #expect(Self.header(run.requests.first, "range") == "bytes=50000-", "an unmarked .part is the first URL's")
        #expect(Self.header(run.requests.first, "if-range") == "\"v1\"")
        #expect(run.file == Self.expected)
    }

    @Test func theCoreMarksAPartWithItsSourceWhenItOpensIt() async throws {
        // What tells the next attempt where a `.part` came from, even when its worker was
        // killed mid-body: the mark goes on when the file is opened, not when the try ends.
        try await withServer { server in
            try await withFolder { folder in
                let destination = folder.appendingPathComponent("f.bin")
                let url = server.baseURL + "/flaky/mark?failures=1&mode=closeMidBody&bytes=100000"
                var request = Request(url: URL(string: url)!, destination: destination, resume: true)
                request.partFileSource = url
                let operation = RequestOperation(request: request)
                operation.autoRetry = false
                guard case .failure = await completion(of: operation) else {
                    Issue.record("the cut body should fail the attempt")
                    return
                }
                var buffer = [CChar](repeating: 0, count: 4096)
                let count = getxattr(part(destination).path, Self.source, &buffer, buffer.count)
                #expect(count > 0)
                #expect(String(decoding: buffer.prefix(max(count, 0)).map { UInt8(bitPattern: $0) }, as: UTF8.self) == url)
            }
        }
    }

    @Test func aRequestWithoutMirrorsEncodesAsBeforeAndTheNewKeysAreChecked() throws {
        // A job stored before mirrors existed decodes; one without them encodes (and so hashes,
        // for its dedup key) as it did.
        let stored = #"{"url":"http://127.0.0.1/a","method":"GET","headerFields":[],"resume":true,"timeouts":{}}"#
        let decoded = try JSONDecoder().decode(JobRequest.self, from: Data(stored.utf8))
        #expect(decoded == JobRequest(url: "http://127.0.0.1/a"))
        let keys = try JSONSerialization.jsonObject(with: try JSONEncoder().encode(decoded)) as? [String: Any]
        #expect(Set(keys?.keys ?? [:].keys) == ["url", "method", "headerFields", "resume", "timeouts"])

        let request = JobRequest(url: "http://127.0.0.1/a", mirrors: ["http://127.0.0.2/a"], maxBytesPerSecond: 1000)
        #expect(try JSONDecoder().decode(JobRequest.self, from: JSONEncoder().encode(request)) == request)
        #expect((1...4).map(request.url(forAttempt:)) == ["http://127.0.0.1/a", "http://127.0.0.2/a", "http://127.0.0.1/a", "http://127.0.0.2/a"])
        let made = try request.request(folder: URL(fileURLWithPath: "/tmp"), extraFields: [], attempt: 2).get()
        #expect(made.url.absoluteString == "http://127.0.0.2/a" && made.maxReceiveSpeed == 1000)

        func refusal(_ request: JobRequest) -> JobSpecError? {
            do { _ = try JobSpec(kind: "download", request: request).validated() } catch { return error }
            return nil
        }
        #expect(refusal(JobRequest(url: "http://127.0.0.1/a", mirrors: ["file:///etc/passwd"])) == .badURL("file:///etc/passwd"))
        #expect(refusal(JobRequest(url: "http://127.0.0.1/a", maxBytesPerSecond: 0)) == .badRateLimit(0))
    }
}
