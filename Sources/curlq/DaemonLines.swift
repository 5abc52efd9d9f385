import CurlQueue
import CurlQueueDownloads
import CurlQueueDurable
import Foundation

/// What `curlq daemon` prints on standard output: a line when it starts, one per recorded job
/// outcome, and lines when it stops. With `timestamps` (standard output is not a terminal:
/// a log file, journald) each line starts with the UTC time. URLs are shown redacted.
/// Called from the worker's handler tasks and a signal queue: counts under a lock, each line
/// written whole.
final class DaemonLines: Sendable {
    private struct Counts {
        var done = 0
        var alreadyThere = 0
        var failed = 0
        var cancelled = 0
    }
    private let counts = Locked(Counts())
    private let quiet: Bool
    private let timestamps: Bool

    init(quiet: Bool, timestamps: Bool) {
        self.quiet = quiet
        self.timestamps = timestamps
    }

    func started(store: String, queue: String, folder: String, jobs: Int, drain: Double) {
        say("curlq daemon: running the jobs of \(store) (queue \(queue)) into \(folder), \(jobs) at once; "
            + "SIGTERM or Ctrl-C stops it (running downloads get \(BatchRunner.seconds(drain)) to finish)")
    }

    /// The RPC's address (never its secret).
    func rpc(url: String, listensOnAll: Bool) {
        say("curlq daemon: aria2 JSON-RPC at \(url)" + (listensOnAll ? " (and every other address of this machine)" : "")
            + ", WebSocket too")
    }

    /// `--metrics-listen`'s address.
    func metrics(url: String, listensOnAll: Bool) {
        say("curlq daemon: Prometheus metrics at \(url)" + (listensOnAll ? " (a listener not only on loopback)" : ""))
    }

    func stopping(signal: Int32, running: Int, drain: Double) {
        let name = signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "signal \(signal)"
        say("curlq daemon: \(name): taking no new jobs; \(running) running get up to \(BatchRunner.seconds(drain)), then go back to the store with their .part files")
    }

    func stopped() {
        let counts = counts.withLock { $0 }
        say("curlq daemon: stopped: \(counts.done) done, \(counts.alreadyThere) already there, \(counts.failed) failed, \(counts.cancelled) cancelled in this run")
    }

    /// A job whose outcome the store recorded.
    func ended(_ job: DurableJob) {
        let id = job.record.id
        let url = URL(string: job.record.spec.request.url).map(Format.url) ?? "?"
        let name = job.record.spec.request.destination ?? url
        switch job.outcome {
        case .completed(let result) where result.alreadyThere == true:
            counts.withLock { $0.alreadyThere += 1 }
            say("job \(id) already there: \(name), \(Format.bytes(result.bytes))")
        case .completed(let result):
            counts.withLock { $0.done += 1 }
            say("job \(id) done: \(name), \(Format.bytes(result.bytes)) (HTTP \(result.status))")
        case .failed(let reason, _):
            counts.withLock { $0.failed += 1 }
            say("job \(id) failed: \(name) from \(url): \(reason)")
        case .cancelled(let reason):
            counts.withLock { $0.cancelled += 1 }
            say("job \(id) cancelled: \(name): \(reason)")
        case .retry(let reason, let at, _):
            say("job \(id) will be tried again at \(Self.time(at)): \(name): \(reason)")
        }
    }

    private func say(_ line: String) {
        guard !quiet else { return }
        Output.standardOutput((timestamps ? Self.time(Date()) + " " : "") + Format.safe(line) + "\n")
    }

    static func time(_ date: Date) -> String {
        ISO8601DateFormatter().string(from: date)  // 2026-11-28T15:01:02Z
    }
}
