import CurlQueueDurable
import Foundation
import Testing

@testable import CurlQueuePostgres

/// The PostgreSQL store reads its rows by column name (`PQfname`), against a real PostgreSQL
/// 15: the same job whatever the order of the columns a statement selects; a column missing or
/// of another type, or a statement that fails, is a `PostgresStoreError` that names the column
/// and the statement (never its parameters), never a trap.
@Suite(.enabled(if: TestPostgres.enabled, "CQ_POSTGRES_URL is unset: run through scripts/test-postgres (or scripts/test) to test against PostgreSQL"))
struct PostgresRowDecodingTests {
    /// A store with three jobs (one available, one running, one failed), and a connection of
    /// the test's own on its database.
    static func store() async throws -> (harness: PostgresHarness, store: PostgresJobStore, connection: PGConnection) {
        let harness = try PostgresHarness()
        let store = try await harness.open()
        let specs = ["a", "b", "c"].map { (name: String) in
            JobSpec(kind: "download", request: JobRequest(url: "http://127.0.0.1:9/\(name)", destination: name))
        }
        _ = try await store.enqueue(specs, queue: "rows", order: .fifo)
        let worker = WorkerInfo(node: WorkerInfo.localNode, pid: getpid())
        try await store.register(worker)
        let claimed = try await store.claim(queue: "rows", kinds: ["download"], limit: 2, worker: worker.id)
        #expect(try await store.finish(claimed[0].lease, .failed(reason: "HTTP 404 Not Found", kind: .http)))
        return (harness, store, try PGConnection(conninfo: harness.url))
    }

    static var columns: [String] {
        SQL.columns().split(separator: ",").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
    }

    @Test func aJobReadInAnotherColumnOrderIsTheSameJob() async throws {
        let (harness, store, connection) = try await Self.store()
        let expected = try await store.jobs(JobFilter(queue: "rows"))
        #expect(expected.map(\.state) == [.available, .running, .failed])
        for order in [Self.columns.reversed(), Self.columns.sorted()] {
            let rows = try connection.query("SELECT \(order.joined(separator: ", ")) FROM cq_job ORDER BY id DESC")
            #expect(try rows.map { try PostgresJobRow($0).record } == expected)
        }
        await harness.closeAll()
    }

    @Test func aMissingColumnIsAnErrorNamingItAndTheStatement() async throws {
        let (harness, _, connection) = try await Self.store()
        let sql = "SELECT \(Self.columns.filter { !$0.hasSuffix("AS cancel_requested") }.joined(separator: ", ")) FROM cq_job"
        let row = try #require(try connection.query(sql).first)
        let error = #expect(throws: PostgresStoreError.self) { try PostgresJobRow(row) }
        #expect(error?.message.contains("no column \"cancel_requested\"") == true, "\(String(describing: error))")
        #expect(error?.sql == sql)
        #expect(error?.description.contains("in: SELECT id, queue, spec") == true, "\(String(describing: error))")
        await harness.closeAll()
    }

    @Test func aColumnOfAnotherTypeIsAnErrorNamingIt() async throws {
        let (harness, _, connection) = try await Self.store()
        let sql = "SELECT \(Self.columns.map { $0 == "attempt" ? "'seven' AS attempt" : $0 }.joined(separator: ", ")) FROM cq_job"
        let row = try #require(try connection.query(sql).first)
        let error = #expect(throws: PostgresStoreError.self) { try PostgresJobRow(row) }
        #expect(error?.message == "the column \"attempt\" holds a value that is not Int", "\(String(describing: error))")
        #expect(error?.sql == sql)
        let null = "SELECT \(Self.columns.map { $0 == "queue" ? "NULL AS queue" : $0 }.joined(separator: ", ")) FROM cq_job"
        let nullRow = try #require(try connection.query(null).first)
        let nullError = #expect(throws: PostgresStoreError.self) { try PostgresJobRow(nullRow) }
        #expect(nullError?.message == "the column \"queue\" holds NULL, not String", "\(String(describing: nullError))")
        await harness.closeAll()
    }

    @Test func aFailedStatementsErrorCarriesItWithoutItsParameters() async throws {
        let (harness, _, connection) = try await Self.store()
        let sql = "SELECT $1::int / 0 AS quotient"
        let error = #expect(throws: PostgresStoreError.self) { try connection.query(sql, ["424242"]) }
        #expect(error?.sqlState == "22012")
        #expect(error?.sql == sql)
        #expect(error?.description.hasPrefix("PostgreSQL error 22012: ") == true, "\(String(describing: error))")
        #expect(error?.description.hasSuffix(" (in: SELECT $1::int / 0 AS quotient)") == true, "\(String(describing: error))")
        #expect(error?.description.contains("424242") == false)
        await harness.closeAll()
    }
}
