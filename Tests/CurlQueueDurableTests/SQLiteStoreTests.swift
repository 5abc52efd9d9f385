import CurlQueue
import CurlQueueDurable
import CurlQueueDurableTestSupport
import CurlQueueSQLite
import Foundation
import Testing

/// A clock the tests move: real time plus an offset.
final class TestClock: Sendable {
    private let offset = Locked<TimeInterval>(0)
    func now() -> Date { Date().addingTimeInterval(offset.withLock { $0 }) }
    func advance(_ duration: Duration) {
        offset.withLock { $0 += Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18 }
    }
}

/// A fresh SQLite store in a temp folder, and its clock.
func makeSQLiteHarness(ttl: Duration = .seconds(60), retention: Duration = .seconds(3600)) throws -> (StoreHarness, String) {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("durable-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    let path = folder + "/jobs.sqlite"
    let clock = TestClock()
    var options = SQLiteJobStore.Options()
    options.workerTTL = ttl
    options.retention = retention
    options.now = { clock.now() }
    let frozen = options
    let harness = StoreHarness(
        open: { try SQLiteJobStore(path: path, options: frozen) },
        advance: { clock.advance($0) },
        workerTTL: ttl, retention: retention)
    return (harness, folder)
}

@Suite struct SQLiteStoreTests {
    @Test(arguments: StoreConformance.cases)
    func conformance(_ name: String) async throws {
        let (harness, folder) = try makeSQLiteHarness()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await StoreConformance.run(name) { harness }
    }

    @Test func filesArePrivate() async throws {
        let (harness, folder) = try makeSQLiteHarness()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try await harness.open()
        _ = try await store.enqueue([JobSpec(kind: "k", request: JobRequest(url: "http://127.0.0.1/x"))], queue: "q", order: .fifo)
        try await store.register(WorkerInfo(node: WorkerInfo.localNode, pid: getpid()))
        for name in try FileManager.default.contentsOfDirectory(atPath: folder) {
            let attributes = try FileManager.default.attributesOfItem(atPath: folder + "/" + name)
            let mode = (attributes[.posixPermissions] as? Int ?? 0) & 0o077
            #expect(mode == 0, "\(name) is readable by others")
        }
    }

    @Test func readOnlyStoreGivesAClearError() async throws {
        let (harness, folder) = try makeSQLiteHarness()
        defer {
            chmod(folder, 0o700)
            try? FileManager.default.removeItem(atPath: folder)
        }
        _ = try await harness.open()
        #expect(throws: SQLiteError.self) {
            _ = try SQLiteJobStore(path: folder + "/missing/jobs.sqlite")
        }
    }
}
