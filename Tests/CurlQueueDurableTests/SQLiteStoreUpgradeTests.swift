import CurlQueueDurable
import CurlQueueTestHelpers
import Foundation
import Testing

@testable import CurlQueueSQLite

/// A store file written by an earlier version of the schema is upgraded when it is opened.
@Suite struct SQLiteStoreUpgradeTests {
    @Test func aVersion1FileIsUpgradedWithItsJobsKept() async throws {
        try await withFolder { folder in
            let path = folder.appendingPathComponent("jobs.sqlite").path
            do {
                // Version 1 as the first release wrote it, with a job awaiting its handler.
                let connection = try SQLiteConnection(path: path, busyTimeoutMilliseconds: 1000)
                try connection.execute("PRAGMA journal_mode = WAL")
                try connection.execute(SQLiteSchema.create)
                try connection.execute("PRAGMA user_version = 1")
            }
            let old = try SQLiteJobStore(path: path)
            #expect(try await old.enqueue([JobSpec(kind: "k", request: JobRequest(url: "http://127.0.0.1:9/a"))],
                                          queue: "q", order: .fifo).count == 1)
            let connection = try SQLiteConnection(path: path, busyTimeoutMilliseconds: 1000)
            #expect(try connection.query("PRAGMA user_version").first?.decode("user_version", as: Int64.self) == SQLiteSchema.version)
            #expect(try connection.query("SELECT handler_failures FROM cq_job").first?.decode("handler_failures", as: Int64.self) == 0)
        }
    }
}
