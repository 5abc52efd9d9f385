import ArgumentParser
import CurlQueue
import CurlQueueDownloads
import CurlQueueDemoServer
import Foundation

/// `curlq demo`: starts a local HTTP server with generated files and downloads from it in
/// three short batches that show concurrency, priorities, retries, a resume and FIFO vs LIFO.
/// Needs no network; finishes in about fifteen seconds.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Watch curlq at work against a local server it starts itself (no network needed).",
        discussion: """
            Starts an HTTP server on 127.0.0.1 (a random port) serving generated files — large, \
            slow, failing once, missing, busy with Retry-After — and downloads them into a \
            temporary folder in three batches: a mixed batch (4 at a time, priorities, retries), \
            an interrupted download resumed with -c, and FIFO against LIFO order. Exits 0 when \
            everything behaved as expected, 1 otherwise.
            """
    )

    @Option(help: ArgumentHelp("auto (bars on a terminal, else lines), bar, lines or none.", valueName: "MODE"))
    var progress: ProgressMode = .auto

    @Flag(help: "Keep the downloaded files (their folder is printed) instead of removing them.")
    var keep = false

    func run() async throws {
        let server = try await DemoServer.start()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("curlq-demo-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let signals = SignalTrap()
        var demo = Demo(server: server, folder: folder, progress: progress, signals: signals)
        say(bold("curlq demo") + ": downloads from a test server it started at \(server.baseURL)\n"
            + "into \(folder.path)\n\n")

        await demo.mixedBatch()
        if signals.received == nil { await demo.interruptAndResume() }
        if signals.received == nil { await demo.order() }

        try? await server.shutdown()
        if keep {
            say("The files are in \(folder.path)\n")
        } else {
            try? FileManager.default.removeItem(at: folder)
        }
        if let number = signals.received { throw ExitCode(ExitStatus.interrupted(by: number)) }
        if demo.surprises.isEmpty {
            say(bold("All as expected.") + " Next: curlq get --help, and docs/curlq.md.\n")
        } else {
            say("Unexpected:\n" + demo.surprises.map { "  - \($0)\n" }.joined())
            throw ExitCode(ExitStatus.someFailed)
        }
    }
}

private func say(_ text: String) { Output.error(text) }

private func bold(_ text: String) -> String {
    Terminal.isInteractive(STDERR_FILENO) && Terminal.coloursAllowed ? "\u{1B}[1m\(text)\u{1B}[0m" : text
}

/// The three batches of the demo, and what each is expected to show.
private struct Demo {
    let server: DemoServer
    let folder: URL
    let progress: ProgressMode
    let signals: SignalTrap
    var surprises: [String] = []

    init(server: DemoServer, folder: URL, progress: ProgressMode, signals: SignalTrap) {
        self.server = server
        self.folder = folder
        self.progress = progress
        self.signals = signals
    }

    func entry(_ path: String, _ name: String, _ priority: InputPriority = .normal) -> InputEntry {
        InputEntry(url: server.url(path), origin: "demo", out: name, priority: priority)
    }

    func run(
        _ entries: [InputEntry], in subfolder: String, configure: (inout BatchOptions) -> Void = { _ in },
        onProgress: (@Sendable (Int, Int64, BatchRunner) -> Void)? = nil
    ) async -> BatchReport {
        let directory = folder.appendingPathComponent(subfolder, isDirectory: true)
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var options = BatchOptions(directory: directory)
        configure(&options)
        let jobs = BatchPlanner.plan(entries, options: options)
        let display = makeDisplay(progress)
        let runner = BatchRunner(jobs: jobs, options: options, display: display, onProgress: onProgress)
        signals.watch(runner)
        let report = await runner.run()
        say(Summary.text(report, colours: display.usesTerminal && Terminal.coloursAllowed) + "\n")
        return report
    }

    mutating func expect(_ condition: Bool, _ surprise: @autoclosure () -> String) {
        if !condition { surprises.append(surprise()) }
    }

    /// 1: more files than slots, three priorities, two kinds of failure that retries cure,
    /// one that they cannot (404), and a connection that breaks twice and is resumed.
    mutating func mixedBatch() async {
        say(bold("1. A mixed batch, 4 at a time.") + " urgent.txt comes last but has priority high,\n"
            + "   later-*.dat low. flaky.bin breaks twice; busy.json answers 503 with\n"
            + "   Retry-After; cut.iso's connection drops twice, each retry asking for the\n"
            + "   rest (Range); missing.txt is a 404.\n")
        let entries = [
            entry("/bytes/24000000?drip=40&chunk=400000", "video.mp4"),
            entry("/bytes/9000000?drip=50&chunk=150000", "dataset.csv"),
            entry("/bytes/600000?drip=100&chunk=15000", "slow.log"),
            entry("/flaky/flaky?failures=2&mode=closeMidBody&bytes=3000000", "flaky.bin"),
            entry("/flaky/busy?failures=1&status=503&retryAfter=1", "busy.json"),
            entry("/status/404", "missing.txt"),
            entry("/bytes/6000000?closeAfter=2500000&chunk=100000&drip=25", "cut.iso"),
            entry("/bytes/2000000?drip=30&chunk=100000", "later-1.dat", .low),
            entry("/bytes/2000000?drip=30&chunk=100000", "later-2.dat", .low),
            entry("/bytes/2000000?drip=30&chunk=100000", "later-3.dat", .low),
            entry("/bytes/200000?delay=300", "urgent.txt", .high),
        ]
        let report = await run(entries, in: "1-mixed")
        guard report.interruption == nil else { return }
        let byName = Dictionary(uniqueKeysWithValues: report.results.map { (($0.path as NSString).lastPathComponent, $0) })
        for (name, result) in byName where name != "missing.txt" {
            expect(result.outcome == .downloaded, "\(name) should have been downloaded: \(result.error ?? "?")")
        }
        expect(byName["missing.txt"]?.status == 404, "missing.txt should have failed with 404")
        expect(byName["flaky.bin"]?.attempts == 3, "flaky.bin should have taken 3 attempts")
        expect(byName["busy.json"]?.attempts == 2, "busy.json should have taken 2 attempts")
        expect((byName["busy.json"]?.seconds ?? 0) >= 1, "busy.json should have waited for Retry-After")
        let order = report.results.sorted { $0.startOrder < $1.startOrder }.map { ($0.path as NSString).lastPathComponent }
        expect(order.first == "urgent.txt", "urgent.txt (priority high) should have started first, not \(order.first ?? "none")")
        expect(Set(order.suffix(3)) == ["later-1.dat", "later-2.dat", "later-3.dat"], "the later-*.dat files (priority low) should have started last: \(order)")
        let cutRanges = server.requests.filter { $0.uri.contains("closeAfter") }.compactMap { $0.header("Range") }
        expect(!cutRanges.isEmpty, "cut.iso should have been resumed with Range")
    }

    /// 2: a download stopped at about 40% (as Ctrl-C would), then the same batch with -c.
    mutating func interruptAndResume() async {
        say(bold("2. Interrupted, then resumed.") + " big.iso is stopped at 40%, as Ctrl-C would\n"
            + "   stop it: its .part file stays, and the same batch run again with -c asks the\n"
            + "   server for the rest only (Range).\n")
        let entries = [entry("/bytes/30000000?drip=40&chunk=300000", "big.iso")]
        server.resetStatistics()
        let stopped = await run(entries, in: "2-resume", onProgress: { _, bytes, runner in
            if bytes >= 12_000_000 { runner.interrupt(.requested("stopped on purpose")) }
        })
        if signals.received != nil { return }
        let part = stopped.results.first.map { $0.path + ".part" } ?? ""
        let kept = FileKind.size(part) ?? 0
        expect(stopped.results.first?.outcome == .interrupted && kept > 0, "big.iso should have been stopped with a .part file")
        say("   big.iso.part holds \(Format.bytes(kept)). Again, with -c:\n")
        let resumed = await run(entries, in: "2-resume") { $0.resume = true }
        if signals.received != nil { return }
        let range = server.requests.last { $0.path.hasPrefix("/bytes/") }?.header("Range")
        say("   The server was asked for \(range.map { "Range: \($0)" } ?? "everything (no Range)").\n\n")
        expect(range == "bytes=\(kept)-", "the resumed request should have asked for bytes=\(kept)-, not \(range ?? "everything")")
        let result = resumed.results.first
        expect(result?.outcome == .downloaded && result?.bytes == 30_000_000, "big.iso should be complete after the resume")
    }

    /// 3: the same five files one at a time, in FIFO then LIFO order.
    mutating func order() async {
        say(bold("3. FIFO against LIFO.") + " The same five files, one at a time (-j 1).\n")
        let names = ["a", "b", "c", "d", "e"]
        for mode in [RequestQueue.Mode.firstInFirstOut, .lastInFirstOut] {
            let label = mode == .firstInFirstOut ? "fifo" : "lifo"
            let entries = names.map { entry("/bytes/400000?drip=60&chunk=50000&n=\($0)", "\($0).txt") }
            server.resetStatistics()
            _ = await run(entries, in: "3-\(label)") { options in
                options.jobs = 1
                options.order = mode
            }
            if signals.received != nil { return }
            let started = server.requests.compactMap { $0.uri.split(separator: "n=").last.map(String.init) }
            say("   --order \(label): started \(started.joined(separator: " "))\n\n")
            expect(started == (mode == .firstInFirstOut ? names : names.reversed()), "--order \(label) started \(started)")
        }
    }
}
