import CCurl  // <sys/xattr.h>: lgetxattr, for the validator a .part file keeps
import CurlQueue
import CurlQueueDownloads
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The settings of one batch, from the command line (or the demo).
struct BatchOptions: Sendable {
    var directory: URL
    /// Transfers at once; 0 = no limit.
    var jobs = 4
    /// Transfers at once to one scheme, host and port; 0 = no limit.
    var perHost = 0
    var order: RequestQueue.Mode = .firstInFirstOut
    /// Retries after the first attempt, network errors and `retryHTTP` statuses alike.
    var retries = 5
    var retryHTTP: Set<Int> = [429, 503]
    /// `--retry-dns`: retry a host name that does not resolve; without it such a file fails at once.
    var retryDNS = false
    /// Bounds the whole transfer of one file, retries included (seconds).
    var timeout: Double?
    /// Bounds each connection attempt (seconds).
    var connectTimeout: Double?
    /// `--stall-timeout`: an attempt fails (and is retried) when no byte moved for this long; nil for none.
    var stallTimeout: Double? = 60
    /// `-c`: ask for the rest of any existing `.part` file, even one without a validator.
    var resume = false
    /// `--restart`: start every file over, discarding its `.part` file. Without it (or `-c`),
    /// a `.part` that carries the validator an earlier run kept with it is resumed.
    var restart = false
    /// Replace files that already exist instead of skipping them.
    var overwrite = false
    /// `-H`: sent with every URL.
    var headers: [HeaderField] = []
    /// `-A`: the `User-Agent` sent unless a header names one; empty for none.
    var userAgent = CurlqVersion.userAgent
    /// Compute the sha256 of every file (for `--json`), not only the ones to verify.
    var digestEverything = false
    /// `--cacert`, `--capath`, `--pinnedpubkey`, `-k`.
    var tls = Request.TLSOptions()
    /// `--speed-limit`/`--speed-time`: an attempt slower than this fails and is retried.
    var lowSpeed: Request.Timeouts.LowSpeed?
    /// `--limit-rate`: bytes per second per file.
    var limitRate: Int64?
    /// `--max-overall-rate`: bytes per second for the whole run, shared by the running files.
    var overallRate: SharedRateLimit?
    /// `-u`, `--netrc`, `--netrc-file`, `-b`.
    var credentials = Credentials()
    /// `-v`: request and response heads on standard error (Verbose.swift).
    var verbose = false
    /// `-s/--split`: connections (byte ranges) per file; 1 = one connection (SplitDownload.swift).
    var split = 1
    /// `-J/--remote-header-name`: a file without `out=`/`-o` takes the name its response's
    /// `Content-Disposition` proposes, once complete (``ContentDisposition``, BatchRunner+ServerName.swift).
    var remoteHeaderName = false
    /// `-R/--remote-time`: a downloaded file gets its response's `Last-Modified` as its time.
    var remoteTime = false
    /// `--on-download-complete`: run after each downloaded file (DownloadHook.swift).
    var hook: DownloadHook?
}

/// One file of the batch, with everything decided before the first request. Kept small:
/// a batch may hold tens of thousands of them.
struct Job: Sendable {
    enum Plan: Sendable, Equatable {
        case download
        /// The final file is already there (and `--overwrite` was not given).
        case skip
        /// Cannot be attempted; the reason.
        case fail(String)
    }

    var index: Int
    var url: URL
    /// The file's path in the output folder, safe and unique in the batch: its name, after the
    /// `dir=` folders it goes to (`isos/a.iso`).
    var name: String
    var priority: InputPriority
    /// The expected digest.
    var checksum: Checksum?
    /// The URL's own `header=` lines (merged with `-H` when the request is made).
    var headers: [HeaderField]
    /// Bytes already in the `.part` file whose rest will be asked for.
    var resumeOffset: Int64
    /// Bytes of a `.part` file that will be discarded, and why (said on the start line).
    var discardedPart: DiscardedPart?
    var plan: Plan
    /// The other URLs of the file (an input line of TAB-separated URLs), tried after `url`
    /// (Mirrors.swift). `url` names the file.
    var mirrors: [URL] = []
    /// `max-download-limit=`: this file's own rate, in place of `--limit-rate`.
    var maxBytesPerSecond: Int64?
    /// `-J` applies: once complete, the file moves to the name its response proposes, if any
    /// (false when `out=` or `-o` named it).
    var takesServerName = false

    /// A `.part` file started over rather than resumed.
    struct DiscardedPart: Sendable, Equatable {
        var bytes: Int64
        /// `--restart` asked for it; else the `.part` had no validator to make a resume safe.
        var asked: Bool
        /// The `.part` holds the ranges of a split download (`-s`), and this run does not split it.
        var split = false

        var description: String {
            if asked { return "starting over (--restart): discarding \(Format.bytes(bytes)) of .part" }
            if split { return "starting over: the .part holds the ranges of a split download; -s resumes them" }
            return "starting over: the \(Format.bytes(bytes)) .part has no validator from an earlier curlq run; -c resumes it anyway"
        }
    }
}

/// Where a job's files go in the output folder.
struct JobPaths {
    /// The output folder, absolute, without a trailing slash ("" for the root folder).
    let folder: String

    init(folder: URL) {
        var path = folder.path
        while path.hasSuffix("/") { path.removeLast() }
        self.folder = path
    }

    /// Where the file stands once complete (and verified).
    func final(_ job: Job) -> String { folder + "/" + job.name }

    /// Where the transfer puts it: the final path, or `NAME.unverified` while a checksum is to
    /// be checked, so that nothing unverified ever stands under the final name. The transfer
    /// itself writes `<download>.part` until the body is complete.
    func download(_ job: Job) -> String {
        job.checksum == nil ? final(job) : final(job) + NameAllocator.unverifiedSuffix
    }

    func part(_ job: Job) -> String { download(job) + ".part" }
}

enum BatchPlanner {
    /// Decides the name, headers and fate of every entry. Reads the output folder (to find
    /// existing files and `.part` files) but changes nothing.
    static func plan(_ entries: [InputEntry], options: BatchOptions) -> [Job] {
        var names = NameAllocator()
        let paths = JobPaths(folder: options.directory)
        var jobs: [Job] = []
        jobs.reserveCapacity(entries.count)
        for (index, entry) in entries.enumerated() {
            let wanted = entry.out.map(SafeFileName.sanitize) ?? SafeFileName.from(url: entry.url)
            var job = Job(
                index: index, url: entry.url, name: names.claim(entry.dir.map { $0 + "/" + wanted } ?? wanted), priority: entry.priority,
                checksum: entry.checksum, headers: entry.headers, resumeOffset: 0, discardedPart: nil, plan: .download,
                mirrors: entry.mirrors)
            job.takesServerName = options.remoteHeaderName && entry.out == nil
            job.maxBytesPerSecond = entry.maxBytesPerSecond
            job.plan = decide(&job, paths: paths, options: options)
            jobs.append(job)
        }
        return jobs
    }

    /// Why the folders of a `dir=` path (checked by ``InputFile/folder(_:)``) cannot take the
    /// file, or nil: something on the way that is not a folder (a symbolic link is never gone
    /// through). Missing folders are made when the file starts.
    static func subfolderProblem(_ name: String, paths: JobPaths) -> String? {
        var path = paths.folder
        for part in name.split(separator: "/").dropLast() {
            path += "/" + part
            switch FileKind.of(path) {
            case .missing, .directory: continue
            case .symbolicLink: return "\(path) is a symbolic link: a download never goes through it"
            case .file, .other: return "\(path) is not a folder"
            }
        }
        return nil
    }

    private static func decide(_ job: inout Job, paths: JobPaths, options: BatchOptions) -> Job.Plan {
        if let problem = subfolderProblem(job.name, paths: paths) { return .fail(problem) }
        let final = paths.final(job)
        switch FileKind.of(final) {
        case .directory:
            return .fail("\(final) exists and is a folder")
        case .file, .symbolicLink, .other:
            if !options.overwrite { return .skip }
        case .missing:
            break
        }
        let written = job.checksum == nil ? [paths.part(job)] : [paths.part(job), paths.download(job)]
        for path in written {
            switch FileKind.of(path) {
            case .symbolicLink: return .fail("refusing to write through the symbolic link \(path)")
            case .directory: return .fail("\(path) exists and is a folder")
            default: continue
            }
        }
        let part = paths.part(job)
        if FileKind.of(part) == .file, let size = FileKind.size(part), size > 0 {
            // A split download's `.part` (-s) is as long as the file, its holes not yet fetched: only
            // its ranges file says how much of it is there, and only a split run may resume it.
            if let ranges = SplitSidecar.read(SplitSidecar.path(forPart: part)), ranges.total == size {
                if options.restart || options.split < 2 || !job.mirrors.isEmpty {
                    job.discardedPart = Job.DiscardedPart(bytes: ranges.doneBytes, asked: options.restart, split: !options.restart)
                } else {
                    job.resumeOffset = ranges.doneBytes
                }
                return .download
            }
            // A `.part` with the validator the engine keeps with it (an ETag or Last-Modified)
            // is resumed by default: If-Range makes the server send the whole file instead if it
            // changed. Without one, only -c resumes it: nothing says it is the start of this file.
            if !options.restart, options.resume || FileKind.hasPartValidator(part) {
                job.resumeOffset = size
            } else {
                job.discardedPart = Job.DiscardedPart(bytes: size, asked: options.restart)
            }
        }
        return .download
    }
}

extension FileKind {
    /// Whether the `.part` file at `path` carries the validator (a strong ETag or Last-Modified)
    /// of the response it holds the start of, as `DestinationFile.validatorAttribute` in the
    /// engine keeps it: the engine then sends it as If-Range when resuming.
    static func hasPartValidator(_ path: String) -> Bool {
        lgetxattr(path, PartFileAttribute.validator, nil, 0) > 0
    }
}
