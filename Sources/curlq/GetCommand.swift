import ArgumentParser
import CurlQueue
import CurlQueueDownloads
import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `curlq get`: downloads a batch of URLs into a folder.
struct GetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Download URLs into a folder, several at a time.",
        discussion: """
            URLs come from the arguments and from input files (-i). An input file holds one URL \
            per line; blank lines and '#' comments are skipped; indented lines below a URL set \
            its options:

              https://example.org/images/disk.iso
                  out=disk.iso
                  priority=high
                  sha256=0123…(64 hex digits; or sha512=, sha1=, md5=)
                  header=Authorization: Bearer s3cr3t

            Mirrors: several URLs for one file on one line, separated by TABs (as aria2c). The \
            first names the file (unless out= does); when one fails in a way another server could \
            fix (network error, stall, 5xx, 404, 410, 429, checksum mismatch) the next is tried, \
            round the list within --retries (each mirror at least once). A .part from one mirror \
            is resumed on another only with a checksum to check the result; else it starts over, \
            and says so. -u and -H/header= credentials go only to the first URL's origin. URLs \
            given as arguments are always separate files, as with curl.

            Files are written as NAME.part and renamed to NAME once complete (and verified, when \
            a checksum is given; it is computed as the bytes arrive). Names come from out= or the URL's last path segment, made safe: \
            nothing is ever written outside the output folder. With -J, a complete file then moves \
            to the name its server proposes, made safe the same way.

            Credentials (-u, --netrc, --netrc-file, -b) go only to the origin of each URL: a \
            redirect to another scheme, host or port gets none of them. They are never shown.

            EXAMPLES:
              curlq get -d downloads https://example.org/a.iso https://example.org/b.iso
              curlq get -o disk.iso https://example.org/images/disk-1.iso
              curlq get -i urls.txt -d downloads -j 8 --per-host 2
              curlq get -i urls.txt -d downloads        # again after Ctrl-C: resumes
              curlq get --session s.db -i urls.txt -d downloads  # again after kill -9: goes on
              curlq get --json -q -i - < urls.txt > report.json

            A habit of curl or aria2c (--retry, -x, -C -, -m, a bare 'curlq URL') gets a message \
            with curlq's spelling; -L and -f are accepted and change nothing (curlq always follows \
            redirects and fails on an HTTP error status). docs/curlq.md, "Where curl's or aria2c's \
            habits and safety pull apart", says why each choice was made.

            EXIT STATUS: 0 every file downloaded or already there; 1 one or more failed (or an \
            --on-download-complete hook did); \
            2 usage error (nothing was downloaded); 130 interrupted (SIGINT); 143 terminated (SIGTERM).
            """
    )

    @Argument(help: ArgumentHelp("URLs to download (http or https).", valueName: "URL"))
    var urls: [String] = []

    @Option(name: [.customShort("i"), .customLong("input")],
            help: ArgumentHelp("Read URLs and their options from FILE ('-' for standard input). Repeatable.", valueName: "FILE"))
    var inputs: [String] = []

    // MARK: Where files go (-o is a file as in curl, -d the folder as in aria2c)

    @Option(name: [.customShort("d"), .customLong("dir")],
            help: ArgumentHelp("Folder to download into; created when missing.", valueName: "DIR"))
    var directory: String = "."

    @Option(name: [.customShort("o"), .customLong("output")],
            help: ArgumentHelp("The file to write the one URL to, as curl's -o (relative to -d). For a folder, use -d.", valueName: "FILE"))
    var output: String?

    @Flag(name: [.customShort("O"), .customLong("remote-name")],
          help: "Name each file after its URL's last path segment (what curlq always does; accepted as curl's -O).")
    var remoteName = false

    // MARK: curl's habits that are curlq's behaviour anyway: accepted, changing nothing

    @Flag(name: [.customShort("L"), .customLong("location")],
          help: "Accepted for curl's habit; changes nothing: curlq always follows redirects (up to 10), credentials never past another origin.")
    var location = false

    @Flag(name: [.customShort("f"), .customLong("fail")],
          help: "Accepted for curl's habit; changes nothing: an HTTP error status always fails its file, and no error body is saved.")
    var fail = false

    @Flag(name: [.customShort("J"), .customLong("remote-header-name")],
          help: "Name each file as its server's Content-Disposition says (filename*, else filename; made safe, base name only, in the -d folder), once it is complete and verified; without one, or for a resumed file whose 206 has none, the URL's name stays. Never replaces a file already there (that file fails, kept under the URL's name). Ignored for a file named by -o or out=. Not with --session.")
    var remoteHeaderName = false


    /// TLS, headers, credentials, time and speed limits: the options `curlq daemon` shares.
    @OptionGroup(title: "Transfer options") var transfer: TransferOptions

    @Option(name: [.customShort("j"), .customLong("jobs")],
            help: ArgumentHelp("Transfers at once; 0 means no limit.", valueName: "N"))
    var jobs: Int = 4

    @Option(name: .customLong("per-host"),
            help: ArgumentHelp("Transfers at once to one host (scheme, host and port); 0 means no limit.", valueName: "N"))
    var perHost: Int = 0

    @Option(help: ArgumentHelp("Which waiting URL starts next within a priority: fifo (first listed) or lifo (last listed).", valueName: "fifo|lifo"))
    var order: Order = .fifo

    @Option(help: ArgumentHelp("Retries after the first attempt, for network errors and --retry-http statuses alike, with exponential backoff and jitter.", valueName: "N"))
    var retries: Int = 5

    @Option(name: .customLong("retry-http"),
            help: ArgumentHelp("HTTP statuses to retry, comma-separated, or 'none'. Retry-After is honoured.", valueName: "CODES"))
    var retryHTTP: String = "429,503"


    // MARK: One file over several connections (-s/--split, SplitDownload.swift)

    @Option(name: [.customShort("s"), .customLong("split")],
            help: ArgumentHelp("Fetch each file as N byte ranges at once, into one NAME.part (as aria2's -x/-s; 1 to 64, default 1). Needs a server that answers ranges with a validator (ETag or Last-Modified), else one connection; each range resumes on a rerun (NAME.part.ranges). A split file takes one -j slot and up to N connections (at most --per-host); --limit-rate holds for the whole file, its ranges together.", valueName: "N"))
    var split: Int = 1

    @Flag(name: [.customShort("c"), .customLong("continue")],
          help: "Resume every NAME.part file, even one without the validator curlq keeps with it (resumed by default).")
    var resume = false

    @Option(help: ArgumentHelp("Record the batch in FILE (an SQLite store, created when missing) as it goes: the same command run again after Ctrl-C, a crash or kill -9 skips the files recorded complete (no request), resumes the interrupted ones and runs the rest. Implies -c.", valueName: "FILE"))
    var session: String?

    @Flag(name: [.customShort("R"), .customLong("remote-time")],
          help: "Give each downloaded file its server's Last-Modified time, as curl's -R (without one, the time it was written).")
    var remoteTime = false

    @Option(help: ArgumentHelp("The checksum of the one URL, as aria2c's --checksum: sha-256=HEX (or sha256=, sha-512=, sha-1=, md5=); as sha256= in an input file.", valueName: "ALGO=HEX"))
    var checksum: String?

    @Flag(help: "Start every file over, discarding its NAME.part file.")
    var restart = false

    @Flag(help: "Replace files that already exist; without it each is checked (its sha256=, else the size the server announces) and skipped as already there, or failed when incomplete.")
    var overwrite = false


    // MARK: Messages a person can act on


    @Option(name: .customLong("on-download-complete"),
            help: ArgumentHelp("After each file is downloaded, run COMMAND (an executable, not a shell line) with the file's absolute path as its one argument, as aria2c's hook; environment: CURLQ_PATH, CURLQ_URL, CURLQ_BYTES, CURLQ_SHA256. One at a time; its output goes to standard error. A hook that fails is reported and makes the exit status 1; the file stays.", valueName: "COMMAND"))
    var onDownloadComplete: String?

    @Flag(name: .customLong("retry-dns"),
          help: "Retry a host name that does not resolve, like a network error; without it the file fails at once, as with curl's --retry.")
    var retryDNS = false


    @Flag(name: .shortAndLong, help: "Print each request's and final response's head on standard error, secrets (Authorization, Cookie, Set-Cookie, tokens, URL passwords) hidden; after redirects, where they led and which given fields were not sent past one to another origin.")
    var verbose = false

    @Flag(help: "When done, print one JSON object on standard output (schema version 2, in docs/curlq.md): per URL its outcome (downloaded, resumed, skipped, failed, interrupted), reason and errorKind, paths that exist, status, bytes, sha256, attempts and seconds; counts of each (failed: not the interrupted ones, which are unfinished).")
    var json = false

    @Flag(name: .shortAndLong, help: "No progress and no summary; failures are still reported.")
    var quiet = false

    @Option(help: ArgumentHelp("auto (bars on a terminal, else lines), bar, lines or none.", valueName: "MODE"))
    var progress: ProgressMode = .auto

    @Option(name: .customLong("progress-interval"),
            help: ArgumentHelp("With --progress lines (standard error not a terminal): a line per running file (bytes, speed, time left) every this many seconds (default 5; 0 for none).", valueName: "SECONDS"))
    var progressInterval: Double = LineDisplay.defaultInterval

    enum Order: String, CaseIterable, ExpressibleByArgument {
        case fifo, lifo
    }

    func validate() throws {
        guard jobs >= 0 else { throw ValidationError("--jobs must be 0 (no limit) or more, not \(jobs)") }
        guard perHost >= 0 else { throw ValidationError("--per-host must be 0 (no limit) or more, not \(perHost)") }
        guard !(resume && restart) else { throw ValidationError("-c/--continue and --restart contradict each other: give one") }
        guard !(session != nil && restart) else { throw ValidationError("--session resumes (it implies -c): --restart contradicts it") }
        guard !(session != nil && remoteHeaderName) else {
            throw ValidationError("-J/--remote-header-name and --session do not go together: a session knows each file by its URL's name, which -J changes once the file is complete")
        }
        guard retries >= 0 else { throw ValidationError("--retries must be 0 or more, not \(retries)") }
        guard (1...SplitSidecar.maxRanges).contains(split) else { throw ValidationError("-s/--split must be 1 to \(SplitSidecar.maxRanges), not \(split)") }
        _ = try Self.parseStatuses(retryHTTP)
        if let checksum { _ = try Self.parseChecksum(checksum) }
        if let onDownloadComplete, onDownloadComplete.isEmpty || onDownloadComplete.contains(where: { $0 == " " || $0 == "\t" }),
           FileKind.of(onDownloadComplete) == .missing {
            throw ValidationError("--on-download-complete runs one executable with the file's path as its argument, never a shell line: "
                + "put \(quoted(onDownloadComplete)) in a script and give its path")
        }
        try transfer.validate(jobs: jobs)
        guard progressInterval.isFinite, progressInterval >= 0, progressInterval <= 1e6 else {
            throw ValidationError("--progress-interval must be a number of seconds, 0 for none, not \(progressInterval)")
        }
        for url in urls {
            if case .failure(let problem) = InputFile.validateURL(url) { throw ValidationError(problem.message) }
        }
    }

    /// `--checksum sha-256=HEX` (aria2c's spelling; `sha256=`, `sha-512=`, `sha512=`, `sha-1=`,
    /// `sha1=`, `md5=` too) → the checksum, or a usage error saying what is accepted.
    static func parseChecksum(_ text: String) throws -> Checksum {
        guard let equals = text.firstIndex(of: "=") else {
            throw ValidationError("--checksum takes ALGO=HEX (sha-256=, sha-512=, sha-1= or md5=), not \(quoted(text))")
        }
        let name = text[..<equals].lowercased().replacingOccurrences(of: "-", with: "")
        guard let algorithm = DigestAlgorithm(rawValue: name), ["sha256", "sha512", "sha1", "md5"].contains(name) else {
            throw ValidationError("--checksum: unknown algorithm \(quoted(String(text[..<equals]))) (sha-256, sha-512, sha-1 or md5)")
        }
        do {
            return Checksum(algorithm: algorithm, hex: try InputFile.parseDigest(String(text[text.index(after: equals)...]), algorithm))
        } catch {
            throw ValidationError("--checksum: \(error.message)")
        }
    }

    /// `429,503` → [429, 503]; `none` or empty → [].
    static func parseStatuses(_ text: String) throws -> Set<Int> {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed.isEmpty || trimmed.lowercased() == "none" { return [] }
        var codes: Set<Int> = []
        for part in trimmed.split(separator: ",", omittingEmptySubsequences: false) {
            let digits = part.trimmingCharacters(in: .whitespaces)
            guard let code = Int(digits), (100...599).contains(code) else {
                throw ValidationError("--retry-http takes HTTP status codes (100 to 599) separated by commas, not \(quoted(text))")
            }
            codes.insert(code)
        }
        return codes
    }

    func run() async throws {
        let (jobs, options) = try makeBatch()
        // The library's own log (its -k warning for every URL, its retries) says nothing that
        // curlq does not say itself, once, in its own words; and -q must mean quiet.
        LoggingSystem.bootstrap { _ in SwiftLogNoOpLogHandler() }
        if transfer.insecure {
            Output.error("curlq: warning: -k/--insecure: certificates are not checked; anyone on the network path can read and change these downloads\n")
        }
        let display = quiet ? SilentDisplay() : makeDisplay(progress, interval: progressInterval)
        let signals = SignalTrap()
        // --session (GetSession.swift): the store says which files are done; it is told of the rest.
        let session = try self.session.map(GetSession.init(path:))
        let recorded = try await session?.prepare(jobs, paths: JobPaths(folder: options.directory)) ?? []
        let runner = BatchRunner(jobs: jobs, options: options, display: display, session: session, recorded: recorded)
        signals.watch(runner)
        let report = await runner.run()
        await session?.end()

        if quiet {
            Output.error(Summary.quietText(report))
        } else {
            Output.error(Summary.text(report, colours: display.usesTerminal && Terminal.coloursAllowed))
        }
        if json { JSONReport.write(report) { Output.standardOutput($0) } }
        let status = report.exitStatus
        if status != ExitStatus.success { throw ExitCode(status) }
    }

    /// Reads and checks all the input, prepares the folder and plans every file; the parsed
    /// input is let go of before the first request.
    func makeBatch() throws -> ([Job], BatchOptions) {
        // Checked here rather than in validate(), so that a mistyped option is reported as such.
        guard !urls.isEmpty || !inputs.isEmpty else {
            throw UsageError("give at least one URL, or an input file with -i (see curlq get --help)")
        }
        var entries = try readEntries()
        if let checksum {
            guard entries.count == 1 else {
                throw UsageError("--checksum is for one URL (as aria2c's), but there are \(entries.count); give sha256= under each URL in an input file")
            }
            if let given = entries[0].checksum, given != (try Self.parseChecksum(checksum)) {
                throw UsageError("--checksum and the input file's \(given.algorithm.rawValue)= disagree for \(quoted(entries[0].url.absoluteString))")
            }
            entries[0].checksum = try Self.parseChecksum(checksum)
        }
        var folder = directory
        if let output {
            let (outputFolder, name) = try Self.split(output: output, count: entries.count, directory: directory)
            folder = outputFolder
            entries[0].out = name
        }
        var options = BatchOptions(directory: try prepareFolder(folder))
        options.jobs = jobs
        options.perHost = perHost
        options.order = order == .lifo ? .lastInFirstOut : .firstInFirstOut
        options.retries = retries
        options.retryHTTP = try Self.parseStatuses(retryHTTP)
        options.timeout = transfer.timeout
        options.stallTimeout = transfer.stallTimeout > 0 ? transfer.stallTimeout : nil
        options.connectTimeout = transfer.connectTimeout
        options.resume = resume || session != nil  // --session implies -c
        options.restart = restart
        options.overwrite = overwrite
        options.headers = transfer.headerFields
        options.userAgent = transfer.userAgent ?? CurlqVersion.userAgent
        options.retryDNS = retryDNS
        options.digestEverything = json
        options.tls = try transfer.tlsOptions(ProcessInfo.processInfo.environment)
        try transfer.applyRates(to: &options)
        options.credentials = try transfer.credentials(ProcessInfo.processInfo.environment)
        options.verbose = verbose
        options.split = split
        options.remoteHeaderName = remoteHeaderName
        options.remoteTime = remoteTime
        options.hook = onDownloadComplete.map(DownloadHook.init(command:))
        return (BatchPlanner.plan(entries, options: options), options)
    }


    /// Every URL with its options: the arguments first, then each input file in turn. All of
    /// it is read and checked before the first request.
    func readEntries() throws -> [InputEntry] {
        var entries: [InputEntry] = []
        var bad: [String] = []
        for (number, text) in urls.enumerated() {
            guard case .success(let url) = InputFile.validateURL(text) else { continue }  // checked in validate()
            entries.append(InputEntry(url: url, origin: "argument \(number + 1)"))
        }
        for path in inputs {
            let name = path == "-" ? "standard input" : path
            let data: Data
            // `/dev/stdin` is read as `-`: opening it again fails where standard input is a socket.
            switch path == "-" || path == "/dev/stdin" ? Self.readAll(STDIN_FILENO) : Self.readAll(path) {
            case .success(let bytes): data = bytes
            case .failure(let error): throw UsageError("cannot read the input file \(quoted(path)): \(error.reason)")
            }
            let (parsed, problems) = InputFile.parseAll(data, origin: name)
            entries += parsed
            bad += problems.map { "\(name):\($0.line): \($0.message)" }
        }
        // Every bad line at once (the first `shownProblems`), so that one run finds them all.
        if !bad.isEmpty {
            var text = bad.prefix(Self.shownProblems).joined(separator: "\ncurlq: error: ")
            if bad.count > Self.shownProblems { text += "\ncurlq: error: … and \(bad.count - Self.shownProblems) more bad lines" }
            if bad.count > 1 { text += "\ncurlq: \(bad.count) bad input lines; nothing was downloaded" }
            throw UsageError(text)
        }
        return entries
    }

    /// The most bad input lines reported one by one.
    static let shownProblems = 20

    /// A failed read, with `strerror`'s words for it.
    struct ReadError: Error {
        var reason: String
        init(errno code: Int32) { reason = String(cString: strerror(code)) }
        init(_ reason: String) { self.reason = reason }
    }

    /// Everything in the file at `path` (a regular file, a FIFO such as `<(cmd)`, `/dev/stdin`,
    /// a device), read with `read(2)` to its end: Foundation's `Data(contentsOf:)` refuses what
    /// is not a regular file, and reported that as "permission denied".
    static func readAll(_ path: String) -> Result<Data, ReadError> {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return .failure(ReadError(errno: errno)) }
        defer { close(descriptor) }
        var info = stat()
        if fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFDIR { return .failure(ReadError("it is a folder")) }
        return readAll(descriptor)
    }

    /// Everything readable from `descriptor` until its end.
    static func readAll(_ descriptor: Int32) -> Result<Data, ReadError> {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count == 0 { return .success(data) }
            if count < 0 {
                if errno == EINTR { continue }
                return .failure(ReadError(errno: errno))
            }
            data.append(contentsOf: buffer[0..<count])
        }
    }

    /// `-o FILE`: the folder it goes into (FILE's own folder, under `directory` when relative)
    /// and its name. Only for exactly one URL, and never a folder: the old `-o DIR` must not
    /// turn quietly into a file named DIR.
    static func split(output: String, count: Int, directory: String) throws -> (folder: String, name: String) {
        guard count == 1 else {
            throw UsageError("-o names the file for one URL (as curl's -o), but there are \(count); to download them into a folder, use -d \(quoted(output))")
        }
        let path = output.hasPrefix("/") || directory == "." ? output : directory + "/" + output
        let name = (output as NSString).lastPathComponent
        if output.hasSuffix("/") || name == "." || name == ".." || name.isEmpty || FileKind.of(path) == .directory
            || (FileKind.of(path) == .symbolicLink && FileKind.of(URL(fileURLWithPath: path).resolvingSymlinksInPath().path) == .directory) {
            throw UsageError("-o names a file, and \(quoted(output)) is a folder; to download into a folder, use -d \(quoted(output))")
        }
        let parent = (path as NSString).deletingLastPathComponent
        return (parent.isEmpty ? "." : parent, name)
    }

    /// The output folder as an absolute URL, created when missing, and found writable before
    /// any request is sent (a usage error otherwise, naming the folder and why).
    func prepareFolder(_ directory: String) throws -> URL {
        let folder = try existingFolder(directory)
        if let reason = FolderCheck.cannotWrite(into: folder.path) {
            throw UsageError("cannot write into the folder \(quoted(directory)): \(reason); nothing was downloaded")
        }
        return folder
    }

    /// The output folder as an absolute URL, created when missing.
    func existingFolder(_ directory: String) throws -> URL {
        let folder = URL(fileURLWithPath: directory, isDirectory: true).standardizedFileURL
        switch FileKind.of(folder.path) {
        case .directory:
            return folder
        case .missing:
            if let reason = FolderCheck.create(folder.path) {
                throw UsageError("cannot create the folder \(quoted(directory)): \(reason)")
            }
            return folder
        case .symbolicLink where FileKind.of(folder.resolvingSymlinksInPath().path) == .directory:
            return folder  // a link to a folder is the user's choice
        default:
            throw UsageError("\(quoted(directory)) is not a folder")
        }
    }
}
