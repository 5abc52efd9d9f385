import ArgumentParser
import CurlQueue
import CurlQueueDurable
import CurlQueuePostgres
import CurlQueueSQLite
import Foundation

/// The `--store` option of the durable commands: `sqlite:PATH` (or a plain path), or a
/// PostgreSQL URL (`postgres://` or `postgresql://`).
struct StoreOptions: ParsableArguments {
    @Option(name: .customLong("store"),
            help: ArgumentHelp("The job store: sqlite:PATH (the file is created 0600 when missing), or postgres://USER@HOST[:PORT]/DATABASE (tables created on first use).", valueName: "STORE"))
    var store: String

    @Option(name: .customLong("queue"), help: ArgumentHelp("The store queue.", valueName: "NAME"))
    var queue: String = "default"

    var isPostgres: Bool { store.hasPrefix("postgres://") || store.hasPrefix("postgresql://") }

    /// Opens the store, runs `body` with it, and closes it. A PostgreSQL store that cannot be
    /// reached, or fails later, is a `StoreFailure` (exit 1); a malformed URL a `UsageError`
    /// (exit 2). No message shows the URL's password.
    func withStore<T>(_ body: (any JobStore) async throws -> T) async throws -> T {
        guard isPostgres else { return try await body(try openSQLite()) }
        let secret = StoreURL(store)
        let opened: PostgresJobStore
        do {
            opened = try await PostgresJobStore.open(url: store)
        } catch let error as PostgresStoreError where error.kind == .invalidURL {
            throw UsageError(secret.redact("--store \(store): \(error)"))
        } catch {
            throw StoreFailure(secret.redact("cannot open the store \(store): \(error)"))
        }
        do {
            let value = try await body(opened)
            await opened.close()
            return value
        } catch let error as PostgresStoreError {
            await opened.close()
            throw StoreFailure(secret.redact("the store \(store): \(error)"))
        } catch {
            await opened.close()
            throw error
        }
    }

    private func openSQLite() throws -> SQLiteJobStore {
        let path = store.hasPrefix("sqlite:") ? String(store.dropFirst("sqlite:".count)) : store
        guard !path.isEmpty else { throw UsageError("--store needs a path: sqlite:PATH") }
        do {
            return try SQLiteJobStore(path: path)
        } catch {
            throw UsageError("cannot open the store \(path): \(error)")
        }
    }
}

/// A store's URL and the password in it (`user:PASSWORD@` or `password=` in the query), so
/// that no message curlq prints shows it.
struct StoreURL {
    private var secrets: [String] = []

    init(_ url: String) {
        if let components = URLComponents(string: url) {
            if let password = components.password, !password.isEmpty { secrets.append(password) }
            if let percent = components.percentEncodedPassword, !percent.isEmpty { secrets.append(percent) }
            for item in components.queryItems ?? [] where item.name == "password" {
                if let value = item.value, !value.isEmpty { secrets.append(value) }
            }
            if let query = components.percentEncodedQuery {
                for pair in query.split(separator: "&") where pair.hasPrefix("password=") {
                    let value = String(pair.dropFirst("password=".count))
                    if !value.isEmpty { secrets.append(value) }
                }
            }
        } else if let at = url.range(of: "@"), let scheme = url.range(of: "://"), scheme.upperBound < at.lowerBound {
            // Not a URL Foundation parses (a bad port, say): the text between the first ':' of
            // the user part and the '@'.
            let user = url[scheme.upperBound..<at.lowerBound]
            if let colon = user.firstIndex(of: ":") { secrets.append(String(user[user.index(after: colon)...])) }
        }
        secrets = secrets.filter { !$0.isEmpty }.sorted { $0.count > $1.count }
    }

    /// `text` with every occurrence of the password replaced by `***`.
    func redact(_ text: String) -> String {
        secrets.reduce(text) { $0.replacingOccurrences(of: $1, with: "***") }
    }
}

/// The store failed or could not be reached (exit 1): not a mistake in the command line.
struct StoreFailure: Error, CustomStringConvertible {
    var message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
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
        // A job in the store holds one URL: mirrors would be dropped without a word.
        if let entry = entries.first(where: { !$0.mirrors.isEmpty }) {
            throw UsageError("\(entry.origin): mirrors (TAB-separated URLs) are not supported by enqueue: a durable job "
                + "holds one URL; give one URL per line, or use 'curlq get -i' (nothing was enqueued)")
        }
        let specs = entries.map { entry in
            JobSpec(
                kind: "download",
                request: JobRequest(url: entry.url.absoluteString, headerFields: entry.headers.map { .init($0.name, $0.value) },
                                    destination: SafeFileName.sanitize(entry.out ?? SafeFileName.from(url: entry.url)),
                                    checksum: entry.checksum.map { .init(algorithm: $0.algorithm.rawValue, hex: $0.hex) }),
                priority: entry.priority == .high ? .high : entry.priority == .low ? .low : .normal,
                retry: JobRetryPolicy(maxAttempts: attempts), duplicates: policy)
        }
        let queue = storeOptions.queue
        let results = try await storeOptions.withStore { store in
            do {
                return try await store.enqueue(specs, queue: queue, order: order)
            } catch let error as JobSpecError {
                throw UsageError("nothing enqueued: \(error)")
            }
        }
        for result in results {
            switch result {
            case .inserted(let id, _): Output.standardOutput("\(id)\n")
            case .skipped(let existing): Output.standardOutput("\(existing) (already queued)\n")
            }
        }
    }
}

/// `curlq daemon`: runs a durable worker on a store until SIGTERM or SIGINT.
struct DaemonCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "daemon",
        abstract: "Run the downloads of a job store, until SIGTERM or SIGINT.",
        discussion: """
            EXAMPLES:
              curlq daemon --store sqlite:jobs.db -d downloads -j 8
              curlq daemon --store postgres://cq@db.internal/jobs -d downloads

            On SIGTERM or SIGINT it stops taking jobs, lets running downloads finish for up to \
            --drain-timeout, then gives the rest back to the store with their .part files kept, \
            and exits 0. After a crash or kill -9, the next start resumes the interrupted downloads.

            On PostgreSQL any number of daemons, on any number of machines, share one queue. \
            When the server goes away, running downloads go on and the daemon reconnects by \
            itself (backoff 0.1 s doubling to 5 s). A password is better in ~/.pgpass or \
            PGPASSWORD than in the URL; no message shows it. Exit 2: a bad URL; exit 1: the \
            server cannot be reached.
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
        let folder = URL(fileURLWithPath: directory)
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            throw UsageError("cannot create \(directory): \(error.localizedDescription)")
        }
        let storeQueue = storeOptions.queue
        try await storeOptions.withStore { store in
            let queue = RequestQueue(maxConcurrentRequestCount: concurrency)
            queue.maxConcurrentRequestsPerHost = perHost
            var configuration = DurableWorker.Configuration(folder: folder)
            configuration.queue = storeQueue
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
            } catch let error as PostgresStoreError {
                throw error  // the store's failure (exit 1), said by withStore
            } catch {
                throw UsageError("cannot start the worker: \(error)")
            }
            _ = sources
            let left = worker.jobsLeftLeased
            if !left.isEmpty {
                Output.error("curlq: the store could not be reached: job\(left.count == 1 ? "" : "s") \(left.map(String.init).joined(separator: ", ")) not recorded or given back; they stay leased and run again once the store rescues them\n")
            }
        }
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
        let (queue, limit) = (storeOptions.queue, max(0, limit))
        let (counts, jobs) = try await storeOptions.withStore { store in
            (try await store.counts(queue: queue), try await store.jobs(JobFilter(queue: queue, limit: limit)))
        }
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
        let (queue, targets) = (storeOptions.queue, targets)
        let (cancelled, requested) = try await storeOptions.withStore { store in
            var cancelled: [JobID] = []
            var requested: [JobID] = []
            for target in targets {
                var ids: [JobID] = []
                if let id = JobID(target) {
                    ids = [id]
                } else {
                    ids = try await store.jobs(JobFilter(queue: queue, states: [.scheduled, .available, .running], limit: 100_000))
                        .filter { $0.spec.request.url == target }.map(\.id)
                }
                for id in ids {
                    let result = try await store.cancel(.id(id))
                    cancelled += result.cancelled
                    requested += result.requested
                }
            }
            return (cancelled, requested)
        }
        for id in cancelled { Output.standardOutput("\(id) cancelled\n") }
        for id in requested { Output.standardOutput("\(id) cancel requested (running)\n") }
        if cancelled.isEmpty && requested.isEmpty {
            Output.error("curlq: nothing to cancel\n")
            throw ExitCode(ExitStatus.someFailed)
        }
    }
}
