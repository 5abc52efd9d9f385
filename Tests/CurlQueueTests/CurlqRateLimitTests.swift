@testable import curlq
import CurlQueueDownloads
import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// curlq's speed options: `--limit-rate`, `--max-overall-rate`, `--speed-limit`/`--speed-time`.
/// Times are asserted as lower bounds only: a limited download of N bytes cannot end much
/// before N / rate (libcurl may read one receive buffer ahead of the rate). Accuracy is
/// measured in Benchmarks/ (bench.py rate), not here.
@Suite struct CurlqRateLimitTests {
    @Test func ratesReadAsCurlsSuffixes() {
        #expect(Rate.parse("500") == 500)
        #expect(Rate.parse("500K") == 512_000 && Rate.parse("500k") == 512_000)
        #expect(Rate.parse("2M") == 2 << 20 && Rate.parse("1G") == 1 << 30 && Rate.parse("1.5M") == 3 << 19)
        #expect(Rate.parse("2MB") == 2 << 20 && Rate.parse("2M/s") == 2 << 20)
        for bad in ["", "0", "-1K", "K", "1T", "1e3", "nan", "1..5M", "١٢"] {
            #expect(Rate.parse(bad) == nil, "\(bad)")
        }
    }

    @Test func badSpeedOptionsAreUsageErrors() throws {
        for arguments in [
            ["--limit-rate", "fast"], ["--max-overall-rate", "0"], ["--speed-limit", "-5"], ["--speed-time", "0"],
            ["--limit-rate", "10K", "--speed-limit", "20K"],
            ["--max-overall-rate", "40K", "-j", "8", "--speed-limit", "10K"],
        ] {
            #expect(throws: (any Error).self, "\(arguments)") { _ = try GetCommand.parse(arguments + ["http://127.0.0.1:1/x"]) }
        }
        let command = try GetCommand.parse(["--lowest-speed-limit", "1K", "--limit-rate", "2M", "http://127.0.0.1:1/x"])
        #expect(command.transfer.speedLimit == "1K" && command.transfer.speedTime == 30)
    }

    @Test func theSpeedOptionsAreInGetsHelp() async throws {
        let help = try await curlq("get", "--help")
        for option in ["--speed-limit", "--lowest-speed-limit", "--speed-time", "--limit-rate", "--max-overall-rate"] {
            #expect(help.stdout.contains(option), "get --help lacks \(option)")
        }
    }

    /// Runs `curlq get` with `arguments` in process, into a new folder; returns the report
    /// and the seconds it took.
    private func get(_ arguments: [String]) async throws -> (BatchReport, Double, URL) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("curlq-rate-\(UUID().uuidString)")
        let command = try GetCommand.parse(["-d", folder.path] + arguments)
        let (jobs, options) = try command.makeBatch()
        let start = ContinuousClock.now
        let report = await BatchRunner(jobs: jobs, options: options, display: SilentDisplay()).run()
        let elapsed = ContinuousClock.now - start
        return (report, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18, folder)
    }

    @Test func aFileUnderLimitRateTakesAtLeastItsSizeOverTheRate() async throws {
        try await withServer { server in
            // 1.5 MiB at 512 KiB/s: 3 s; at least 2 s even if one 512 KiB buffer came at once.
            let (report, seconds, folder) = try await get(["--limit-rate", "512K", server.url("/bytes/1572864").absoluteString])
            defer { try? FileManager.default.removeItem(at: folder) }
            print("1.5 MiB at --limit-rate 512K: \(seconds) s")
            #expect(report.results.map(\.outcome) == [.downloaded])
            #expect(report.results.first?.bytes == 1_572_864)
            #expect(seconds >= 2, "took \(seconds) s")
        }
    }

    @Test func filesUnderMaxOverallRateShareIt() async throws {
        try await withServer { server in
            // 4 × 768 KiB = 3 MiB at 1 MiB/s for the run: 3 s; at least 2 s even if each file's
            // first 256 KiB came at once. Each file alone would be allowed 1 MiB/s: only the
            // sharing makes the run last that long.
            let urls = (1...4).map { server.url("/bytes/786432?n=\($0)").absoluteString }
            let (report, seconds, folder) = try await get(["--max-overall-rate", "1M", "-j", "4"] + urls)
            defer { try? FileManager.default.removeItem(at: folder) }
            print("4 × 768 KiB at --max-overall-rate 1M: \(seconds) s")
            #expect(report.results.map(\.outcome) == Array(repeating: .downloaded, count: 4))
            #expect(seconds >= 2, "took \(seconds) s")
        }
    }

    @Test func aFileBelowSpeedLimitFailsAndIsRetried() async throws {
        try await withServer { server in
            // 1,000 bytes/s against a lowest speed of 10,000 bytes/s for 1 s, one retry.
            let url = server.url("/bytes/100000?chunk=100&drip=100").absoluteString
            let (report, seconds, folder) = try await get(["--speed-limit", "10000", "--speed-time", "1", "--retries", "1", url])
            defer { try? FileManager.default.removeItem(at: folder) }
            print("trickle under --speed-limit: \(report.results.first?.error ?? "-") after \(seconds) s")
            // Two attempts, each failing once it was under the limit for 1 s.
            #expect(report.results.map(\.outcome) == [.failed])
            #expect(report.results.first?.attempts == 2)
            #expect(report.results.first?.error?.contains("too slow") == true, "\(report.results.first?.error ?? "")")
            #expect(seconds >= 2, "took \(seconds) s")
        }
    }
}
