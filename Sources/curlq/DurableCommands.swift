import ArgumentParser
import CurlQueue
import CurlQueueDurable
import CurlQueueSQLite
import Foundation

/// The `--store` option of the durable commands: `sqlite:PATH` (or a plain path).
struct StoreOptions: ParsableArguments {
    @Option(name: .customLong("store"),
            help: ArgumentHelp("The job store: sqlite:PATH (the file is created 0600 when missing).", valueName: "STORE"))
    var store: String

    @Option(name: .customLong("queue"), help: ArgumentHelp("The store queue.", valueName: "NAME"))
    var queue: String = "default"

    func open() throws -> SQLiteJobStore {
        if store.hasPrefix("postgres://") || store.hasPrefix("postgresql://") {
            throw UsageError("--store \(store): this curlq has no PostgreSQL store built in")
        }
        let path = store.hasPrefix("sqlite:") ? String(store.dropFirst("sqlite:".count)) : store
        guard !path.isEmpty else { throw UsageError("--store needs a path: sqlite:PATH") }
        do {
            return try SQLiteJobStore(path: path)
        } catch {
            throw UsageError("cannot open the store \(path): \(error)")
        }
    }
}

/// `curlq enqueue`: adds downloads to a store, for a `curlq daemon` to run.
struct EnqueueCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "enqueue",
        abstract: "Add downloads to a job store (the input format of 'curlq get'); prints their job ids.",
        discussion: """
            EXAMPLES:
              curlq enqueue --store sqlite:jobs.db https://example.org/a.iso
              curlq enqueue --store sqlite:jobs.db -i urls.txt --priority high

            Each job downloads into the daemon's folder (-d of 'curlq daemon') under out= or the \
            URL's last path segment, made safe. Authorization, Cookie and Proxy-Authorization \
            headers are refused: they would be stored in the clear.
            """)

    @OptionGroup var storeOptions: StoreOptions

    @Argument(help: ArgumentHelp("URLs to download (http or https).", valueName: "URL"))
    var urls: [String] = []

    @Option(name: [.customShort("i"), .customLong("input")],
            help: ArgumentHelp("Read URLs and their options from FILE ('-' for standard input). Repeatable.", valueName: "FILE"))
    var inputs: [String] = []

    @Option(help: ArgumentHelp("The priority of jobs with none of their own: high, normal or low.", valueName: "PRIORITY"))
    var priority: String = "normal"

    @Option(help: ArgumentHelp("Where new jobs go among the waiting ones of their priority: fifo or lifo.", valueName: "ORDER"))
    var order: String = "fifo"

    @Option(help: ArgumentHelp("An equal job already queued: replace (cancel it), skip (keep it) or allow (both).", valueName: "POLICY"))
    var duplicates: String = "replace"

    @Option(help: ArgumentHelp("Attempts per job, the first included.", valueName: "N"))
    var attempts: Int = 5

    func run() async throws {
        guard let order = JobOrder(rawValue: order) else { throw UsageError("--order must be fifo or lifo") }
        guard let defaultPriority = InputPriority(rawValue: priority) else { throw UsageError("--priority must be high, normal or low") }
        let policy: JobSpec.DuplicatePolicy
        switch duplicates {
        case "replace": policy = .replaceEarlier
        case "skip": policy = .skipIfPending
        case "allow": policy = .allow
        default: throw UsageError("--duplicates must be replace, skip or allow")
        }
        guard attempts >= 1 else { throw UsageError("--attempts must be at least 1") }
        var entries: [InputEntry] = []
        for (index, text) in urls.enumerated() {
            guard let url = URL(string: text), ["http", "https"].contains(url.scheme?.lowercased() ?? "") else {
                throw UsageError("argument \(index + 1): not an http(s) URL: \(text)")
            }
            entries.append(InputEntry(url: url, origin: "argument \(index + 1)", priority: defaultPriority))
        }
        for input in inputs {
            let data: Data
            do {
                data = input == "-" ? FileHandle.standardInput.readDataToEndOfFile() : try Data(contentsOf: URL(fileURLWithPath: input))
            } catch {
                throw UsageError("cannot read \(input): \(error.localizedDescription)")
            }
            do {
                entries += try InputFile.parse(data, origin: input)
            } catch {
                throw UsageError("\(input): \(error)")
            }
        }
        guard !entries.isEmpty else { throw UsageError("no URL to enqueue") }
        let specs = entries.map { entry in
            JobSpec(
                kind: "download",
                request: JobRequest(url: entry.url.absoluteString, headerFields: entry.headers.map { .init($0.name, $0.value) },
                                    destination: SafeFileName.sanitize(entry.out ?? SafeFileName.from(url: entry.url)),
                                    checksum: entry.checksum.map { .init(algorithm: $0.algorithm.rawValue, hex: $0.hex) }),
                priority: entry.priority == .high ? .high : entry.priority == .low ? .low : .normal,
                retry: JobRetryPolicy(maxAttempts: attempts), duplicates: policy)
        }
        let store = try storeOptions.open()
        do {
            for result in try await store.enqueue(specs, queue: storeOptions.queue, order: order) {
                switch result {
                case .inserted(let id, _): Output.standardOutput("\(id)\n")
                case .skipped(let existing): Output.standardOutput("\(existing) (already queued)\n")
                }
            }
        } catch let error as JobSpecError {
            throw UsageError("nothing enqueued: \(error)")
        }
    }
}

/// `curlq daemon`: runs a durable worker on a store until SIGTERM or SIGINT.
struct DaemonCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "daemon",
        abstract: "Run the downloads of a job store, until SIGTERM or SIGINT.",
        discussion: """
            On SIGTERM or SIGINT it stops taking jobs, lets running downloads finish for up to \
            --drain-timeout, then gives the rest back to the store with their .part files kept, \
            and exits 0. After a crash or kill -9, the next start resumes the interrupted downloads.
            """)

    @OptionGroup var storeOptions: StoreOptions

    @Option(name: [.customShort("d"), .customLong("dir")], help: ArgumentHelp("Folder to download into.", valueName: "DIR"))
    var directory: String = "."

    @Option(name: [.customShort("j"), .customLong("concurrency")], help: ArgumentHelp("Downloads at once.", valueName: "N"))
    var concurrency: Int = 4

    @Option(name: .customLong("per-host"), help: ArgumentHelp("Downloads at once to one host (0: no limit).", valueName: "N"))
    var perHost: Int = 0

    @Option(name: .customLong("drain-timeout"), help: ArgumentHelp("Seconds running downloads get to finish on a stop.", valueName: "SECONDS"))
    var drainTimeout: Double = 30

    @Flag(name: [.customShort("q"), .customLong("quiet")], help: "Print nothing but errors.")
    var quiet = false

    func run() async throws {
        guard concurrency >= 1 else { throw UsageError("-j must be at least 1") }
        guard perHost >= 0, drainTimeout >= 0 else { throw UsageError("--per-host and --drain-timeout cannot be negative") }
        let store = try storeOptions.open()
        let folder = URL(fileURLWithPath: directory)
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            throw UsageError("cannot create \(directory): \(error.localizedDescription)")
        }
        let queue = RequestQueue(maxConcurrentRequestCount: concurrency)
        queue.maxConcurrentRequestsPerHost = perHost
        var configuration = DurableWorker.Configuration(folder: folder)
        configuration.queue = storeOptions.queue
        let worker = DurableWorker(store: store, requestQueue: queue, configuration: configuration)
        let quiet = quiet
        worker.register(kind: "download") { job in
            guard !quiet else { return }
            switch job.outcome {
            case .completed(let result):
                Output.standardOutput("job \(job.record.id): HTTP \(result.status), \(result.bytes) bytes, \(result.file ?? "-")\n")
            case .failed(let reason), .cancelled(let reason), .retry(let reason, _):
                Output.standardOutput("job \(job.record.id): \(reason)\n")
            }
        }
        let drain = Duration.milliseconds(Int64(drainTimeout * 1000))
        var sources: [any DispatchSourceSignal] = []
        for number in [SIGTERM, SIGINT] {
            signal(number, SIG_IGN)  // delivered to the dispatch source instead
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { worker.stop(drain: drain) }
            source.resume()
            sources.append(source)
        }
        do {
            try await worker.run()
        } catch {
            throw UsageError("cannot start the worker: \(error)")
        }
        _ = sources
    }
}

/// `curlq status`: the jobs of a store.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "Show the jobs of a store: counts, then each job with its state and reason.")

    @OptionGroup var storeOptions: StoreOptions

    @Flag(help: "Print JSON: {\"counts\": {...}, \"jobs\": [{id, state, url, file, attempt, error}]}.")
    var json = false

    @Option(help: ArgumentHelp("The most jobs listed, newest first.", valueName: "N"))
    var limit: Int = 1000

    func run() async throws {
        let store = try storeOptions.open()
        let counts = try await store.counts(queue: storeOptions.queue)
        let jobs = try await store.jobs(JobFilter(queue: storeOptions.queue, limit: max(0, limit)))
        if json {
            struct Row: Encodable {
                var id: Int64, state: String, url: String, file: String?, attempt: Int, error: String?
            }
            struct Report: Encodable {
                var counts: [String: Int]
                var jobs: [Row]
            }
            let report = Report(
                counts: Dictionary(uniqueKeysWithValues: counts.map { ($0.key.rawValue, $0.value) }),
                jobs: jobs.map { Row(id: $0.id, state: $0.state.rawValue, url: $0.spec.request.url,
                                     file: $0.spec.request.destination, attempt: $0.attempt, error: $0.lastError) })
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            Output.standardOutput(String(decoding: try encoder.encode(report), as: UTF8.self) + "\n")
            return
        }
        Output.standardOutput(JobState.allCases.map { "\($0.rawValue) \(counts[$0] ?? 0)" }.joined(separator: ", ") + "\n")
        for job in jobs {
            let reason = job.lastError.map { "  (\($0))" } ?? ""
            Output.standardOutput("\(job.id)  \(job.state.rawValue)  \(job.spec.request.url)\(reason)\n")
        }
    }
}

/// `curlq cancel`: cancels jobs by id or URL.
struct CancelCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel",
        abstract: "Cancel jobs by id or URL: waiting ones at once, running ones at their daemon's next heartbeat.")

    @OptionGroup var storeOptions: StoreOptions

    @Argument(help: ArgumentHelp("Job ids or URLs.", valueName: "ID|URL"))
    var targets: [String]

    func run() async throws {
        guard !targets.isEmpty else { throw UsageError("give the ids or URLs of the jobs to cancel") }
        let store = try storeOptions.open()
        var cancelled: [JobID] = []
        var requested: [JobID] = []
        for target in targets {
            var ids: [JobID] = []
            if let id = JobID(target) {
                ids = [id]
            } else {
                ids = try await store.jobs(JobFilter(queue: storeOptions.queue, states: [.scheduled, .available, .running], limit: 100_000))
                    .filter { $0.spec.request.url == target }.map(\.id)
            }
            for id in ids {
                let result = try await store.cancel(.id(id))
                cancelled += result.cancelled
                requested += result.requested
            }
        }
        for id in cancelled { Output.standardOutput("\(id) cancelled\n") }
        for id in requested { Output.standardOutput("\(id) cancel requested (running)\n") }
        if cancelled.isEmpty && requested.isEmpty {
            Output.error("curlq: nothing to cancel\n")
            throw ExitCode(ExitStatus.someFailed)
        }
    }
}
