import CurlQueueDurable
import CurlQueueDurableTestSupport
import Foundation
import Testing

@testable import CurlQueueSQLite

/// Text with a NUL character in the SQLite store, on a real file: kept whole both ways (bound
/// with its byte length, read with `sqlite3_column_bytes`), never cut at the NUL; the cases
/// every store shares are `StoreNULText`'s.
@Suite struct SQLiteStoreNULTests {
    @Test func theJobsJSONRoundTrips() async throws {
        let (harness, folder) = try makeSQLiteHarness()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await StoreNULText.jobJSONRoundTrips(harness.open)
    }

    @Test func aKindKeyOrQueueWithANULIsRefusedAndNothingStored() async throws {
        let (harness, folder) = try makeSQLiteHarness()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await StoreNULText.refusedFieldsStoreNothing(harness.open)
    }

    /// SQLite's text holds a NUL: `lastError` is the reason exactly.
    @Test func aReasonWithANULIsKeptWhole() async throws {
        let (harness, folder) = try makeSQLiteHarness()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await StoreNULText.reasonIsKept(harness.open, lastError: "bad\0byte")
    }

    /// The connection itself: text bound with a NUL is stored with all its bytes and read back whole.
    @Test func textWithANULIsBoundAndReadWhole() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("durable-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let connection = try SQLiteConnection(path: folder + "/text.sqlite", busyTimeoutMilliseconds: 1000)
        let text = "a\0b\0"
        let row = try #require(try connection.query("SELECT ? AS value, length(CAST(? AS BLOB)) AS bytes", [.text(text), .text(text)]).first)
        #expect(try row.decode("value", as: String.self) == text)
        #expect(try row.decode("bytes", as: Int64.self) == 4)
        #expect(try connection.query("SELECT ? AS value", [.text("")]).first?.decode("value", as: String.self) == "")
    }
}
