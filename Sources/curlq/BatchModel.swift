import CurlQueueDownloads
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Seconds on the monotonic clock.
func monotonicSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

/// How one file of the batch ended.
struct FileResult: Sendable {
    enum Outcome: String, Sendable {
        case downloaded, skipped, failed, interrupted
    }

    var url: URL
    /// The final path (where the file stands, or would have).
    var path: String
    var outcome: Outcome
    /// The HTTP status of the last response, nil when none came (or the file was skipped).
    var status: Int?
    /// Bytes of the file on disk: the file itself, or its `.part` when it did not complete.
    var bytes: Int64
    /// The sha256 of the file, when computed (verified files, `--json`).
    var sha256: String?
    /// Attempts made, the first included (0 when none was).
    var attempts: Int
    /// From the first attempt to the end (verification included).
    var seconds: Double
    /// Why it failed; nil on success.
    var error: String?
    /// Bytes received for this file in this run (less than `bytes` after a resume).
    var fetched: Int64 = 0
    /// The transfer's share of `seconds`, without the sha256 check.
    var transferSeconds: Double = 0
    /// 1 for the first file of the batch to start, 2 for the next…; 0 if it never started.
    var startOrder = 0
    /// What kind of failure (`--json`'s `errorKind`); nil when downloaded or skipped.
    var errorKind: ErrorKind?
    /// The unfinished file that stays (`NAME.part`, or `NAME.unverified`), when there is one.
    var partialPath: String?
    /// For a file with mirrors: which one served it and which failed (Mirrors.swift).
    var mirrors: MirrorReport?
    /// `-J`: `path` is the name the server proposed (Content-Disposition), not the URL's.
    var nameFromServer = false
    /// `--on-download-complete`: how its run for this file ended; nil when none ran.
    var hook: DownloadHook.Outcome?

    /// `--json`'s `errorKind`: what a script needs to tell a 404 from a network outage.
    typealias ErrorKind = DownloadFailureKind
}

/// The outcome of a whole batch.
struct BatchReport: Sendable {
    var results: [FileResult]
    var interruption: Interruption?
    var seconds: Double
    /// Bytes received from the network in this run.
    var bytesReceived: Int64
    var directory: URL

    func count(_ outcome: FileResult.Outcome) -> Int { results.reduce(0) { $0 + ($1.outcome == outcome ? 1 : 0) } }

    /// 0 when every file is there, 1 when one failed, 128 + signal when interrupted.
    var exitStatus: Int32 {
        if case .signal(let number)? = interruption { return ExitStatus.interrupted(by: number) }
        if interruption != nil { return ExitStatus.someFailed }
        return results.contains { $0.outcome == .failed || $0.outcome == .interrupted || $0.hook?.succeeded == false }
            ? ExitStatus.someFailed : ExitStatus.success
    }
}

/// Why a batch stopped early.
enum Interruption: Sendable, Equatable {
    case signal(Int32)
    /// Stopped by the program (the demo), with a reason to show.
    case requested(String)

    var description: String {
        switch self {
        case .signal(SIGINT): return "interrupted (SIGINT)"
        case .signal(SIGTERM): return "terminated (SIGTERM)"
        case .signal(let number): return "stopped by signal \(number)"
        case .requested(let reason): return reason
        }
    }
}

/// Recent throughput from timestamped byte counts: the rate over the last few seconds.
struct SpeedMeter {
    private var samples: [(time: Double, bytes: Int64)] = []
    static let window = 3.0

    mutating func add(time: Double, bytes: Int64) {
        if let last = samples.last, time - last.time < 0.05, samples.count > 1 {
            samples[samples.count - 1] = (time, bytes)
        } else {
            samples.append((time, bytes))
        }
        while samples.count > 2, time - samples[1].time > Self.window { samples.removeFirst() }
    }

    mutating func reset() { samples.removeAll() }

    /// Bytes per second, nil until there is half a second of samples.
    func bytesPerSecond(at now: Double) -> Double? {
        guard let first = samples.first, let last = samples.last else { return nil }
        let span = max(now, last.time) - first.time
        guard span >= 0.5 else { return nil }
        return Double(last.bytes - first.bytes) / span
    }
}

/// What the live display shows: the state of every file, kept by ``BatchRunner`` on its queue.
struct BatchModel {
    enum Phase: Equatable {
        case queued
        case running
        /// Waiting out a backoff before attempt `attempt` (of `of`), due at `at`.
        case waitingToRetry(attempt: Int, at: Double)
        case verifying
        case finished(FileResult.Outcome)
    }

    struct Live {
        var phase: Phase = .queued
        /// Progress of the body (a resumed file counts what was already on disk).
        var bytes: Int64 = 0
        var total: Int64?
        /// The byte count already added to `BatchModel.received`.
        var counted: Int64 = 0
        /// Bytes received for this file in this run.
        var fetched: Int64 = 0
        /// The final response's `Last-Modified` (for `-R`), when it had one.
        var lastModified: String?
        /// The server ignored the Range of a resume: the body came whole (a 200), from byte 0.
        var restarted = false
        var meter = SpeedMeter()
        var startedAt: Double?
        /// When the transfer ended (before any sha256 check).
        var transferEndedAt: Double?
        /// Order of first start, for the display.
        var startSequence = 0
        var attempts = 0
        var timedOut = false
        /// Why the last attempt is being retried, in words (the retry lines say it).
        var retryReason: String?
        /// Attempts allowed for this file, when not the batch's (a file with more mirrors than that).
        var attemptLimit: Int?
    }

    var jobs: [Job]
    var live: [Live]
    let maxAttempts: Int
    let startedAt = monotonicSeconds()
    var startSequence = 0
    /// Files whose transfer is under way (running, waiting to retry or being verified).
    var active: Set<Int> = []
    var finished = 0
    var downloaded = 0
    var skipped = 0
    var failed = 0
    var interrupted = 0
    /// Bytes received in this run, all files together.
    var received: Int64 = 0
    var meter = SpeedMeter()
    var interruption: Interruption?

    init(jobs: [Job], maxAttempts: Int) {
        self.jobs = jobs
        self.live = Array(repeating: Live(), count: jobs.count)
        self.maxAttempts = maxAttempts
        for job in jobs { live[job.index].counted = job.resumeOffset }
    }

    var queued: Int { jobs.count - finished - active.count }

    mutating func markStarted(_ index: Int, at now: Double) {
        guard live[index].startedAt == nil else { return }
        startSequence += 1
        live[index].startSequence = startSequence
        live[index].startedAt = now
        live[index].attempts = max(1, live[index].attempts)
        live[index].phase = .running
        active.insert(index)
    }

    mutating func progress(_ index: Int, bytes: Int64, total: Int64?, at now: Double) {
        var item = live[index]
        if case .finished = item.phase { return }
        // A new attempt reports 0 until its response head is in (a resumed one then jumps to
        // the size of its .part file): not a restart, nothing to show.
        if bytes == 0, item.counted > 0 { return }
        if case .waitingToRetry = item.phase { item.phase = .running }
        if bytes > item.counted {
            received += bytes - item.counted
            item.fetched += bytes - item.counted
        } else if bytes < item.counted {
            received += bytes  // the server ignored the Range: the file starts over
            item.fetched += bytes
            item.restarted = true
            item.meter.reset()
        }
        item.counted = bytes
        item.bytes = bytes
        item.total = total
        item.meter.add(time: now, bytes: bytes)
        live[index] = item
        meter.add(time: now, bytes: received)
    }

    /// Counts the bytes of a complete file that progress reports had not shown yet. A file
    /// that came `whole` (not a 206: the server ignored or refused the Range of a resume) was
    /// fetched entirely in this run, however far into it the first progress report came.
    mutating func settle(_ index: Int, bytesOnDisk: Int64, whole: Bool) {
        if whole, live[index].fetched < bytesOnDisk {
            received += bytesOnDisk - live[index].fetched
            live[index].fetched = bytesOnDisk
            live[index].counted = bytesOnDisk
            return
        }
        guard bytesOnDisk > live[index].counted else { return }
        received += bytesOnDisk - live[index].counted
        live[index].fetched += bytesOnDisk - live[index].counted
        live[index].counted = bytesOnDisk
    }

    mutating func finish(_ index: Int, _ result: FileResult) {
        live[index].phase = .finished(result.outcome)
        active.remove(index)
        finished += 1
        switch result.outcome {
        case .downloaded: downloaded += 1
        case .skipped: skipped += 1
        case .failed: failed += 1
        case .interrupted: interrupted += 1
        }
    }
}
