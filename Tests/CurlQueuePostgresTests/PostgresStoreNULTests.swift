import CurlQueueDurable
import CurlQueueDurableTestSupport
import Foundation
import Testing

@testable import CurlQueuePostgres

/// Text with a NUL character in the PostgreSQL store, against a real PostgreSQL 15: its text
/// cannot hold one, so the driver refuses such a parameter (never cut at the NUL, as libpq
/// would), the store refuses a kind, key or queue name with one at enqueue, and a reason's NUL
/// becomes U+FFFD in `last_error` only; the cases every store shares are `StoreNULText`'s.
@Suite(.enabled(if: TestPostgres.enabled, "CQ_POSTGRES_URL is unset: run through scripts/test-postgres (or scripts/test) to test against PostgreSQL"))
struct PostgresStoreNULTests {
    @Test func theJobsJSONRoundTrips() async throws {
        let harness = try PostgresHarness()
        try await StoreNULText.jobJSONRoundTrips { try await harness.open() }
        await harness.closeAll()
    }

    @Test func aKindKeyOrQueueWithANULIsRefusedAndNothingStored() async throws {
        let harness = try PostgresHarness()
        try await StoreNULText.refusedFieldsStoreNothing { try await harness.open() }
        await harness.closeAll()
    }

    /// `outcome` keeps the reason exactly; `last_error` shows its NUL as U+FFFD.
    @Test func aReasonWithANULIsKeptInTheOutcome() async throws {
        let harness = try PostgresHarness()
        try await StoreNULText.reasonIsKept({ try await harness.open() }, lastError: "bad\u{FFFD}byte")
        await harness.closeAll()
    }

    /// The connection itself: a parameter with a NUL is refused as the server refuses one
    /// (SQLSTATE 22021), naming the statement; nothing is cut and sent.
    @Test func aParameterWithANULIsRefusedNotCut() throws {
        let url = try TestPostgres.freshDatabase()
        let connection = try PGConnection(conninfo: url)
        let sql = "SELECT $1::text AS value"
        let error = #expect(throws: PostgresStoreError.self) { try connection.query(sql, ["a\0b"]) }
        #expect(error?.kind == .server)
        #expect(error?.sqlState == "22021")
        #expect(error?.sql == sql)
        #expect(error?.description.contains("$1") == true)
        #expect(try connection.query(sql, ["ab"]).first?.decode("value", as: String.self) == "ab")
    }
}
