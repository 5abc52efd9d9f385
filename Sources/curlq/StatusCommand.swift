import ArgumentParser
import CurlQueue
import CurlQueueDurable
import Foundation

/// `curlq status`: the jobs of a store, in a person's words or as JSON.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the jobs of a store: counts, then each job with its state, progress and reason.",
        discussion: """
            States, in words: waiting (for a daemon), delayed (a retry's backoff, or enqueued for \
            later), running, done (the file stands complete under its name, or was already \
            there), failed, cancelled. A running job shows bytes, total, speed and time left as \
            its daemon last recorded them (with its heartbeat, every 15 s). URLs are shown with \
            secrets hidden.

            A 'curlq get --session FILE' run is recorded in the queue curlq-get: \
            curlq status --store sqlite:FILE --queue curlq-get.

            --json prints one object (schema version 2, in docs/curlq.md).
            """)

    @OptionGroup var storeOptions: StoreOptions

    @Flag(help: "Print JSON: {version, queue, counts: {waiting, delayed, running, done, failed, cancelled}, jobs: [...]}.")
    var json = false

    @Option(help: ArgumentHelp("The most jobs listed, newest first.", valueName: "N"))
    var limit: Int = 1000

    func run() async throws {
        let (queue, limit) = (storeOptions.queue, max(0, limit))
        let (counts, jobs, sessionJobs) = try await storeOptions.withStore(mustExist: true) { store in
            let counts = try await store.counts(queue: queue)
            // An empty default queue in a `get --session` file: say where its jobs are.
            let session = counts.isEmpty && queue == "default"
                ? try await store.counts(queue: GetSession.queueName).values.reduce(0, +) : 0
            return (counts, try await store.jobs(JobFilter(queue: queue, limit: limit)), session)
        }
        if sessionJobs > 0 {
            Output.error("curlq: the queue default is empty; this store holds a 'curlq get --session' run of \(sessionJobs) file\(sessionJobs == 1 ? "" : "s"): add --queue \(GetSession.queueName)\n")
        }
        let now = Date()
        if json {
            Output.standardOutput(try StatusReport(queue: queue, counts: counts, jobs: jobs, now: now).json() + "\n")
            return
        }
        let order: [JobState] = [.available, .scheduled, .running, .completed, .failed, .cancelled]
        let words = order.map { "\($0.word) \(counts[$0] ?? 0)" }
        Output.standardOutput(words.joined(separator: ", ") + "\n")
        for job in jobs {
            let row = StatusReport.Row(job, now: now)
            var text = "\(job.id)  \(row.state)  \(row.file ?? "-")"
            if let bytes = row.bytes {
                text += "  " + Format.bytes(bytes) + (row.total.map { " of " + Format.bytes($0) } ?? "")
                if let speed = row.bytesPerSecond { text += ", " + Format.speed(speed) }
                if let eta = row.etaSeconds { text += ", " + Format.duration(eta) + " left" }
                if let age = row.checkpointAgeSeconds { text += " (\(Format.duration(age)) ago)" }
            }
            if job.state == .scheduled { text += "  at \(DaemonLines.time(job.runAt))" }
            text += "  \(row.url)"
            if let error = row.error { text += "  (\(error))" }
            Output.standardOutput(Format.safe(text) + "\n")
        }
    }
}

extension JobState {
    /// The state as a person reads it: waiting, delayed, running, done, failed, cancelled.
    var word: String {
        switch self {
        case .available: return "waiting"
        case .scheduled: return "delayed"
        case .running: return "running"
        case .completed: return "done"
        case .failed: return "failed"
        case .cancelled: return "cancelled"
        }
    }
}

/// `curlq status --json`: schema version 2 (docs/curlq.md).
struct StatusReport: Encodable {
    struct Row: Encodable {
        var id: Int64
        var state: String
        /// The URL with its secrets hidden.
        var url: String
        var file: String?
        var attempt: Int
        var maxAttempts: Int
        var error: String?
        var errorKind: String?
        /// True for a job done because its file was already there (nothing transferred).
        var alreadyThere: Bool?
        /// Bytes on disk: the file's for a done job, the last checkpoint's for a running one.
        var bytes: Int64?
        var total: Int64?
        var bytesPerSecond: Double?
        var etaSeconds: Double?
        /// How old the running job's figures are (its daemon's last heartbeat).
        var checkpointAgeSeconds: Double?
        var sha256: String?
        var status: Int?

        init(_ job: JobRecord, now: Date) {
            id = job.id
            state = job.state.word
            url = URL(string: job.spec.request.url).map(Format.url) ?? "?"
            file = job.spec.request.destination
            attempt = job.attempt
            maxAttempts = job.spec.retry.maxAttempts
            error = job.lastError
            errorKind = job.outcome?.failureKind?.rawValue
            if case .completed(let result)? = job.outcome {
                bytes = result.bytes
                total = result.bytes
                sha256 = result.sha256
                status = result.alreadyThere == true ? nil : result.status
                alreadyThere = result.alreadyThere
            } else if job.state == .running, let checkpoint = job.checkpoint {
                bytes = checkpoint.bytes
                total = checkpoint.total
                bytesPerSecond = checkpoint.bytesPerSecond
                if let total = checkpoint.total, let speed = checkpoint.bytesPerSecond, speed > 0, total >= checkpoint.bytes {
                    etaSeconds = Double(total - checkpoint.bytes) / speed
                }
                checkpointAgeSeconds = checkpoint.recordedAt.map { max(0, now.timeIntervalSince($0)) }
            }
        }
    }

    var version = 2
    var queue: String
    var counts: [String: Int]
    var jobs: [Row]

    init(queue: String, counts: [JobState: Int], jobs: [JobRecord], now: Date) {
        self.queue = queue
        self.counts = Dictionary(uniqueKeysWithValues: counts.filter { $0.value > 0 }.map { ($0.key.word, $0.value) })
        self.jobs = jobs.map { Row($0, now: now) }
    }

    func json() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(self), as: UTF8.self)
    }
}
