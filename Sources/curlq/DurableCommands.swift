import ArgumentParser
import CurlQueue
import CurlQueueDownloads
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
    ///
    /// `mustExist` (status, cancel): an SQLite file that is not there is a usage error, and
    /// nothing is created.
    func withStore<T>(mustExist: Bool = false, _ body: (any JobStore) async throws -> T) async throws -> T {
        guard isPostgres else { return try await body(try openSQLite(mustExist: mustExist)) }
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

    private func openSQLite(mustExist: Bool) throws -> SQLiteJobStore {
        let path = store.hasPrefix("sqlite:") ? String(store.dropFirst("sqlite:".count)) : store
        guard !path.isEmpty else { throw UsageError("--store needs a path: sqlite:PATH") }
        if mustExist, FileKind.of(path) == .missing {
            throw UsageError("there is no store at \(quoted(path)) (nothing was created); check the path, or enqueue to create it")
        }
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
              curlq enqueue --store sqlite:jobs.db -i urls.txt --priority high -H 'Accept: application/octet-stream'

            Each job downloads into the daemon's folder (-d of 'curlq daemon') under out= or the \
            URL's last path segment, made safe. The store holds no secret: a URL with a user or \
            password, a secret query parameter (token=, key=, sig=, …) and secret header fields \
            (Authorization, Cookie, X-Api-Key, …) are refused; give credentials to the daemon \
            (-u, --netrc, -b), which sends them only to the origin they are for. A signed URL \
            whose signature is its query may be stored with --allow-secret-query: every output \
            still hides it.
            """)

    @OptionGroup var storeOptions: StoreOptions

    @Argument(help: ArgumentHelp("URLs to download (http or https).", valueName: "URL"))
    var urls: [String] = []

    @Option(name: [.customShort("i"), .customLong("input")],
            help: ArgumentHelp("Read URLs and their options from FILE ('-' for standard input). Repeatable.", valueName: "FILE"))
    var inputs: [String] = []

    @Option(name: [.customShort("H"), .customLong("header")],
            help: ArgumentHelp("A header for every job, 'Name: value' (no secret ones). Repeatable; an input file's header= overrides it.", valueName: "HEADER"))
    var headers: [String] = []

    @Option(help: ArgumentHelp("The priority of jobs with none of their own: high, normal or low.", valueName: "PRIORITY"))
    var priority: String = "normal"

    @Option(help: ArgumentHelp("Where new jobs go among the waiting ones of their priority: fifo or lifo.", valueName: "ORDER"))
    var order: String = "fifo"

    @Option(help: ArgumentHelp("An equal job already queued: replace (cancel it), skip (keep it) or allow (both).", valueName: "POLICY"))
    var duplicates: String = "replace"

    @Option(help: ArgumentHelp("Retries after the first attempt, as get's --retries (default 4: five attempts).", valueName: "N"))
    var retries: Int?

    @Option(help: ArgumentHelp("Attempts per job, the first included (the older spelling of --retries N-1).", valueName: "N"))
    var attempts: Int?

    @Flag(name: .customLong("allow-secret-query"),
          help: "Store URLs whose query holds a secret-looking parameter (a signed URL) as they are; outputs still hide it.")
    var allowSecretQuery = false

    func validate() throws {
        if let retries, retries < 0 { throw ValidationError("--retries must be 0 or more, not \(retries)") }
        if let attempts, attempts < 1 { throw ValidationError("--attempts must be at least 1, not \(attempts)") }
        if retries != nil, attempts != nil { throw ValidationError("--retries and --attempts say the same: give one") }
        for header in headers {
            if case .failure(let problem) = HeaderField.parse(header) { throw ValidationError("-H \(quoted(header)): \(problem)") }
        }
        for url in urls {
            if case .failure(let problem) = InputFile.validateURL(url) { throw ValidationError(problem.message) }
        }
    }

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
        let maxAttempts = attempts ?? (retries.map { min($0, 1_000_000) + 1 } ?? 5)
        var entries: [InputEntry] = []
        for (index, text) in urls.enumerated() {
            guard case .success(let url) = InputFile.validateURL(text) else { continue }  // checked in validate()
            entries.append(InputEntry(url: url, origin: "argument \(index + 1)", priority: defaultPriority))
        }
        for input in inputs {
            let name = input == "-" ? "standard input" : input
            let data: Data
            switch input == "-" || input == "/dev/stdin" ? GetCommand.readAll(STDIN_FILENO) : GetCommand.readAll(input) {
            case .success(let bytes): data = bytes
            case .failure(let error): throw UsageError("cannot read the input file \(quoted(input)): \(error.reason)")
            }
            let (parsed, problems) = InputFile.parseAll(data, origin: name)
            guard problems.isEmpty else {
                // Every bad line at once, so that one fix-and-rerun is enough.
                throw UsageError(problems.map { "\(name):\($0.line): \($0.message)" }.joined(separator: "\n")
                    + "\nnothing was enqueued")
            }
            entries += parsed
        }
        guard !entries.isEmpty else { throw UsageError("no URL to enqueue") }
        let global = headers.compactMap { try? HeaderField.parse($0).get() }
        for entry in entries {
            let fields = HeaderField.merge(global: global, own: entry.headers)
            for url in entry.urls {
                if let problem = StoredSecrets.problem(url: url, fields: fields, allowSecretQuery: allowSecretQuery) {
                    throw UsageError("\(entry.origin): \(problem) (nothing was enqueued)")
                }
            }
        }
        let specs = entries.map { entry in
            JobSpec(
                kind: "download",
                request: JobRequest(url: entry.url.absoluteString,
                                    headerFields: HeaderField.merge(global: global, own: entry.headers).map { .init($0.name, $0.value) },
                                    destination: (entry.dir.map { $0 + "/" } ?? "") + SafeFileName.sanitize(entry.out ?? SafeFileName.from(url: entry.url)),
                                    checksum: entry.checksum.map { .init(algorithm: $0.algorithm.rawValue, hex: $0.hex) },
                                    mirrors: entry.mirrors.map(\.absoluteString), maxBytesPerSecond: entry.maxBytesPerSecond),
                priority: entry.priority == .high ? .high : entry.priority == .low ? .low : .normal,
                // Each mirror is tried at least once, as `get` does.
                retry: JobRetryPolicy(maxAttempts: max(maxAttempts, entry.urls.count)), duplicates: policy)
        }
        let queue = storeOptions.queue
        let results: [EnqueueResult]
        do {
            results = try await storeOptions.withStore { store in
                do {
                    return try await store.enqueue(specs, queue: queue, order: order)
                } catch let error as JobSpecError {
                    throw UsageError("nothing enqueued: \(error)")
                }
            }
        } catch let failure as StoreFailure where storeOptions.isPostgres {
            // A connection that broke during the enqueue may have lost the reply to a commit.
            throw StoreFailure(failure.message + (failure.message.hasPrefix("cannot open the store")
                ? "; nothing was enqueued"
                : "; the jobs may have been enqueued all the same (the reply to the commit may be what was lost): "
                    + "'curlq status' shows them, and enqueueing them again replaces them (--duplicates replace)"))
        }
        for result in results {
            switch result {
            case .inserted(let id, _): Output.standardOutput("\(id)\n")
            case .skipped(let existing): Output.standardOutput("\(existing) (already queued)\n")
            }
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
        let (cancelled, requested) = try await storeOptions.withStore(mustExist: true) { store in
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
