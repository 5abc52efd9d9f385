import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// The soak: tens of thousands of operations through two queues with faults and cancels
/// (`Tests/Soak/main.swift`, in a process of its own so that its file descriptors, threads
/// and memory are its own). 50,000 by default; `CURLQUEUE_SOAK_REQUESTS` sets the count, and
/// under a sanitizer (`CURLQUEUE_SANITIZER`, set by scripts/test) the default is 3,000.
@Suite struct SoakTests {
    struct Counts: Decodable {
        var ok: Int
        var expectedFailures: Int
        var cancelled: Int
        var cancelledComplete: Int
        var unexpected: Int
    }

    struct Measure: Decodable {
        var fds: Int
        var fdList: [String]
        var threads: Int
        var rssBytes: Int
        var trimmedRSSBytes: Int
    }

    struct Report: Decodable {
        var requests: Int
        var completions: Int
        var operationsCompletedTwiceOrMore: Int
        var operationsNeverCompleted: Int
        var byKind: [String: Counts]
        var unexpectedExamples: [String]
        var bodyBytesVerified: Int
        var cancelsSent: Int
        var seconds: Double
        var baseline: Measure
        var after: Measure
        var peakRSSBytes: Int
        var quietStateAttempts: Int
        var leftSockets: [String]
    }

    /// Runs the Soak executable (built alongside the tests) and returns its standard output
    /// and exit status once it exits.
    static func runSoak(_ arguments: [String]) async throws -> (String, Int32) {
        let folder = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let process = Process()
        process.executableURL = folder.appendingPathComponent("Soak")
        process.arguments = arguments
        return try await runToEnd(process)
    }

    static var requestCount: Int {
        let environment = ProcessInfo.processInfo.environment
        if let value = environment["CURLQUEUE_SOAK_REQUESTS"].flatMap(Int.init), value > 0 { return value }
        return environment["CURLQUEUE_SANITIZER"] == nil ? 50_000 : 3_000
    }

    /// Every operation completes exactly once with the outcome its route must give (every
    /// successful body byte-identical to the pattern the server sent), and afterwards the
    /// process has the same file descriptors, no more threads, and its resident memory back
    /// within 10% of the baseline taken after a warm-up.
    @Test func tensOfThousandsOfOperationsWithFaultsAndCancelsCompleteOnceAndGiveEverythingBack() async throws {
        try await withServer { server in
            let folder = try makeTemporaryFolder()
            defer { try? FileManager.default.removeItem(at: folder) }
            let count = Self.requestCount
            let (output, status) = try await Self.runSoak([server.baseURL, String(count), folder.path])
            // Under a sanitizer a report (a race, a leak) makes the child exit non-zero.
            #expect(status == 0)
            let report = try JSONDecoder().decode(Report.self, from: Data(output.utf8))
            print("soak: \(count) operations in \(String(format: "%.1f", report.seconds)) s; fds \(report.baseline.fds) → \(report.after.fds), threads \(report.baseline.threads) → \(report.after.threads), RSS \(report.baseline.rssBytes >> 20) MiB → \(report.after.rssBytes >> 20) MiB, after malloc_trim \(report.baseline.trimmedRSSBytes >> 20) MiB → \(report.after.trimmedRSSBytes >> 20) MiB (peak \(report.peakRSSBytes >> 20) MiB); quiet after \(report.quietStateAttempts) probe(s); \(report.byKind.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value.ok)/\($0.value.expectedFailures)/\($0.value.cancelled)" }.joined(separator: ", ")) (ok/expected failure/cancelled); \(report.byKind["download"]?.cancelledComplete ?? 0) download(s) cancelled after the whole file was in place")

            // Exactly once.
            #expect(report.completions == count)
            #expect(report.operationsCompletedTwiceOrMore == 0)
            #expect(report.operationsNeverCompleted == 0)
            // Every outcome is the one its route must give, or `.cancelled` for the ones cancelled.
            let unexpected = report.byKind.values.reduce(0) { $0 + $1.unexpected }
            #expect(unexpected == 0, "\(report.unexpectedExamples)")
            // The mix really happened: each kind ran, and its ok/failure came out as designed.
            for kind in ["body", "download", "closeThenOK", "resetThenOK", "midBodyCloseThenOK"] {
                #expect((report.byKind[kind]?.ok ?? 0) > 0, "no successful \(kind)")
            }
            for kind in ["status503", "cutShort", "stall"] {
                #expect((report.byKind[kind]?.expectedFailures ?? 0) > 0, "no \(kind) fault")
            }
            let faults = report.byKind.filter { $0.key != "body" && $0.key != "download" }.values.reduce(0) { $0 + $1.ok + $1.expectedFailures + $1.cancelled }
            #expect(faults * 100 >= count * 7, "only \(faults) faults")
            #expect(report.cancelsSent > 0)
            #expect(report.byKind.values.reduce(0) { $0 + $1.cancelled } > 0)
            #expect(report.bodyBytesVerified > 0)

            // Resources: measured in the same quiet state before and after: one TCP connection
            // left (the server closed the others and libcurl dropped them).
            #expect(report.quietStateAttempts > 0, "more than one TCP connection stayed open: \(report.leftSockets)")
            #expect(report.after.fds == report.baseline.fds, "before: \(report.baseline.fdList)\nafter: \(report.after.fdList)")
            #expect(report.after.threads <= report.baseline.threads)
            // Memory, once malloc gave its free pages back (both times): what stays resident is
            // memory in use. Only without a sanitizer: shadow memory and quarantines say
            // nothing about the program's own.
            if ProcessInfo.processInfo.environment["CURLQUEUE_SANITIZER"] == nil {
                #expect(Double(report.after.trimmedRSSBytes) <= Double(report.baseline.trimmedRSSBytes) * 1.10)
            }
            // Nothing but `.part` files left in the folder: every file under its final name was
            // whole (checked, then removed), whether its download succeeded or was cancelled
            // after the rename.
            let left = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            #expect(left.allSatisfy { $0.hasSuffix(".part") }, "\(left.prefix(10))")
        }
    }
}
