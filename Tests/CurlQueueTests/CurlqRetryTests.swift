@testable import curlq
import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Dispatch
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// curlq's retries and time limits: one budget for network errors and HTTP statuses, the
/// whole-file limit, the connect timeout, the stall limit.
@Suite struct CurlqRetryTests {
    @Test func retriesShareOneBudgetForNetworkErrorsAndHTTPStatuses() async throws {
        try await withServer { server in
            try await withFolder { folder in
                func get(_ arguments: String...) async throws -> CurlqRun {
                    try await curlq(["get", "-d", folder.path, "--json", "--overwrite"] + arguments)
                }
                // Two 503s: 2 retries are enough, 1 is not.
                let enough = try await get("--retries", "2", server.url("/flaky/a?failures=2").absoluteString)
                #expect(enough.status == 0, "\(enough)")
                #expect(try enough.jsonFiles().first?["attempts"] as? Int == 3, "\(enough)")
                // A dropped connection (a network error) takes from the same budget.
                let dropped = try await get("--retries", "0", server.url("/flaky/b?failures=1&mode=close").absoluteString)
                #expect(dropped.status == 1)
                #expect(dropped.stderr.contains("the server closed the connection without answering"), "\(dropped.stderr)")
                let redone = try await get("--retries", "1", server.url("/flaky/b2?failures=1&mode=close").absoluteString)
                #expect(redone.status == 0, "\(redone)")
                #expect(try redone.jsonFiles().first?["attempts"] as? Int == 2)
                let short = try await get("--retries", "1", server.url("/flaky/c?failures=2").absoluteString)
                #expect(short.status == 1)
                #expect(server.hits("c") == 2)
                let report = try #require(try short.jsonFiles().first)
                #expect(report["status"] as? Int == 503 && report["attempts"] as? Int == 2)
                #expect((report["error"] as? String)?.contains("HTTP 503 Service Unavailable (after 2 attempts)") == true)

                // 500 is not retried by default, but is with --retry-http; none turns 503 off.
                #expect(try await get(server.url("/flaky/d?failures=1&status=500").absoluteString).status == 1)
                #expect(server.hits("d") == 1)
                #expect(try await get("--retry-http", "500", server.url("/flaky/e?failures=1&status=500").absoluteString).status == 0)
                #expect(server.hits("e") == 2)
                #expect(try await get("--retry-http", "none", server.url("/flaky/f?failures=1").absoluteString).status == 1)
                #expect(server.hits("f") == 1)

                // Retry-After is honoured.
                let waited = try await get("--progress", "lines", server.url("/flaky/g?failures=1&status=429&retryAfter=1").absoluteString)
                #expect(waited.status == 0, "\(waited)")
                #expect(try #require(try waited.jsonFiles().first?["seconds"] as? Double) >= 1)
                // 1 s asked, plus up to half of it at random (RetryPolicy's jitter).
                let wait = waited.stderr.firstMatch(of: /retry    g  retrying in (\d+\.\d)s \(attempt 2 of 6\): HTTP 429/).flatMap { Double($0.1) }
                #expect(wait.map { (1.0...1.5).contains($0) } == true, "\(waited.stderr)")
            }
        }
    }

    @Test func timeoutBoundsTheWholeFileRetriesIncluded() async throws {
        try await withServer { server in
            try await withFolder { folder in
                // 100 chunks, one every 100 ms: 10 s. With a 1 s limit per file, the 5 default
                // retries must not turn it into 6 s.
                let run = try await curlq("get", "-d", folder.path, "--max-file-time", "1", "--json",
                                          server.url("/bytes/100000?drip=100&chunk=1000").absoluteString)
                #expect(run.status == 1, "\(run)")
                let report = try #require(try run.jsonFiles().first)
                #expect((report["error"] as? String)?.contains("timed out") == true, "\(report)")
                #expect(try #require(report["seconds"] as? Double) < 2.5, "the retries ran past --max-file-time")
                #expect(!exists(folder.appendingPathComponent("100000")))
            }
        }
    }

    @Test func connectTimeoutBoundsTheConnection() async throws {
        try await withFolder { folder in
            // A listening socket whose accept queue is full (the kernel shows it so before this
            // goes on): the kernel leaves new connections hanging.
            let (port, descriptors) = try await fullBacklogListener()
            defer { descriptors.forEach { close($0) } }
            let run = try await curlq("get", "-d", folder.path, "--connect-timeout", "1", "--retries", "0", "--json",
                                      "http://127.0.0.1:\(port)/hangs")
            #expect(run.status == 1, "\(run)")
            let report = try #require(try run.jsonFiles().first)
            #expect((report["error"] as? String)?.contains("timed out connecting") == true, "\(report)")
            // The file's own time, from its start (not the process's, whose start a loaded
            // machine delays: 34 s once, under a load average of 10).
            #expect(try #require(report["seconds"] as? Double) < 25, "the default 30 s connect timeout applied instead: \(report)")
        }
    }

    /// A server that goes silent mid-body fails the attempt after --stall-timeout (on by
    /// default), and the stall is retried like a network error; --max-file-time is the
    /// whole-file limit, named so that it is not mistaken for a stall limit.
    @Test func aStallFailsEachAttemptAndIsRetried() async throws {
        try await withServer { server in
            try await withFolder { folder in
                // Every request sends 30,000 of 100,000 bytes, then nothing, connection open.
                let run = try await curlq("get", "-d", folder.path, "--stall-timeout", "2", "--retries", "1", "--json",
                                          "--progress", "lines", server.url("/bytes/100000?stallAfter=30000").absoluteString)
                #expect(run.status == 1, "\(run)")
                let report = try #require(try run.jsonFiles().first)
                #expect(report["attempts"] as? Int == 2, "\(report)")
                #expect(run.stderr.contains("retry    100000  retrying in"), "\(run.stderr)")
                #expect(run.stderr.contains("(attempt 2 of 2): stalled: no byte moved"), "\(run.stderr)")
                // Functional bound: two 2 s stalls and a backoff, far below the 60 s default.
                #expect(try #require(report["seconds"] as? Double) < 30, "\(report)")
                #expect(!exists(folder.appendingPathComponent("100000")))
                // Not asserted: that the server recorded both requests. On a loaded machine the
                // fixture once read the second head after the client had given up on it.
            }
        }
    }
}
