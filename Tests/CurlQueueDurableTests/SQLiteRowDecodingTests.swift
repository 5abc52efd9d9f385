import CSQLite
import CurlQueueDurable
import Foundation
import Testing

@testable import CurlQueueSQLite

/// The SQLite store reads its rows by column name, on a real file: the same job whatever the
/// order of the columns a statement selects; a column missing or of another type, or a
/// statement that fails, is an `SQLiteError` that names the column and the statement (never its
/// bound values), never a trap.
@Suite struct SQLiteRowDecodingTests {
    /// A store with three jobs (one available, one running, one failed), and a second
    /// connection on its file.
    static func store() async throws -> (store: SQLiteJobStore, connection: SQLiteConnection, folder: String) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("durable-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let store = try SQLiteJobStore(path: folder + "/jobs.sqlite")
        let specs = ["a", "b", "c"].map { (name: String) in
            JobSpec(kind: "download", request: JobRequest(url: "http://127.0.0.1:9/\(name)", destination: name))
        }
        _ = try await store.enqueue(specs, queue: "rows", order: .fifo)
        let worker = WorkerInfo(node: WorkerInfo.localNode, pid: getpid())
        try await store.register(worker)
        let claimed = try await store.claim(queue: "rows", kinds: ["download"], limit: 2, worker: worker.id)
        #expect(try await store.finish(claimed[0].lease, .failed(reason: "HTTP 404 Not Found", kind: .http)))
        return (store, try SQLiteConnection(path: folder + "/jobs.sqlite", busyTimeoutMilliseconds: 1000), folder)
    }

    static var columns: [String] {
        SQLiteJobRow.columns.split(separator: ",").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
    }

    @Test func aJobReadInAnotherColumnOrderIsTheSameJob() async throws {
        let (store, connection, folder) = try await Self.store()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let expected = try await store.jobs(JobFilter(queue: "rows"))
        #expect(expected.map(\.state) == [.available, .running, .failed])
        for order in [Self.columns.reversed(), Self.columns.sorted()] {
            let rows = try connection.query("SELECT \(order.joined(separator: ", ")) FROM cq_job ORDER BY id DESC")
            let read = try rows.map { try SQLiteJobRow($0, decoder: JSONDecoder()) }
            #expect(read.map(\.record) == expected)
            #expect(read.map(\.leaseToken) == [0, 1, 1])
        }
    }

    @Test func aMissingColumnIsAnErrorNamingItAndTheStatement() async throws {
        let (_, connection, folder) = try await Self.store()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let sql = "SELECT \(Self.columns.filter { $0 != "lease_token" }.joined(separator: ", ")) FROM cq_job"
        let row = try #require(try connection.query(sql).first)
        let error = #expect(throws: SQLiteError.self) { try SQLiteJobRow(row, decoder: JSONDecoder()) }
        #expect(error?.code == SQLITE_MISMATCH)
        #expect(error?.message.contains("no column \"lease_token\"") == true, "\(String(describing: error))")
        #expect(error?.sql == sql)
        #expect(error?.description.contains("in: SELECT id, queue, spec") == true, "\(String(describing: error))")
    }

    @Test func aColumnOfAnotherTypeIsAnErrorNamingIt() async throws {
        let (_, connection, folder) = try await Self.store()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let sql = "SELECT \(Self.columns.map { $0 == "attempt" ? "'seven' AS attempt" : $0 }.joined(separator: ", ")) FROM cq_job"
        let row = try #require(try connection.query(sql).first)
        let error = #expect(throws: SQLiteError.self) { try SQLiteJobRow(row, decoder: JSONDecoder()) }
        #expect(error?.message == "the column \"attempt\" holds text, not Int", "\(String(describing: error))")
        #expect(error?.sql == sql)
        // NULL where a value must be.
        let null = "SELECT \(Self.columns.map { $0 == "queue" ? "NULL AS queue" : $0 }.joined(separator: ", ")) FROM cq_job"
        let nullRow = try #require(try connection.query(null).first)
        let nullError = #expect(throws: SQLiteError.self) { try SQLiteJobRow(nullRow, decoder: JSONDecoder()) }
        #expect(nullError?.message == "the column \"queue\" holds NULL, not String", "\(String(describing: nullError))")
    }

    @Test func aFailedStatementsErrorCarriesItWithoutItsValues() async throws {
        let (_, connection, folder) = try await Self.store()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // cq_queue is STRICT: text in its INTEGER column fails.
        let sql = "INSERT INTO cq_queue (name, paused) VALUES (?, ?)"
        let error = #expect(throws: SQLiteError.self) { try connection.query(sql, [.text("rows"), .text("secret-value-42")]) }
        #expect(error?.sql == sql)
        #expect(error?.description.contains("(in: INSERT INTO cq_queue (name, paused) VALUES (?, ?))") == true, "\(String(describing: error))")
        #expect(error?.description.contains("secret-value-42") == false)
    }
}
