import CurlQueue
import CurlQueueDownloads
import Dispatch
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Runs one batch through a `RequestQueue`: one `RequestOperation` per file, handed to the
/// queue when ``Admission`` says it may start (so the queue never holds more than `-j`), the
/// live display told of each start there and fed progress and retries from the queue's events,
/// checksums (computed as the bytes arrive), and the results.
///
/// Everything mutable lives on one serial dispatch queue, `queue`: the operations' completion
/// handlers run there, queue events and timers are sent there, so no lock is needed and none
/// is ever held while calling out. Hashing runs on a queue of its own and reports back.
///
/// A file's start is noted (its start line printed) by the block that hands it to the queue,
/// not on the queue's `.started` event: events reach `queue` through another task, so a fast
/// transfer's completion handler, or the end of the batch, could come before it, and the start
/// line was lost. Start lines, done lines and the summary thus come in that order, each file's
/// once: all are written on `queue`, and the summary only after the batch ended there.
final class BatchRunner: @unchecked Sendable {  // safe: the `var`s are touched only on `queue`
    let queue = DispatchQueue(label: "curlq.batch")
    private let hashQueue = DispatchQueue(label: "curlq.sha256")
    private let requestQueue: RequestQueue
    /// The HEAD requests that check files already there, apart from the downloads' queue (whose
    /// slots `Admission` counts), at most `-j` at once.
    private let checkQueue: RequestQueue
    private let options: BatchOptions
    private let display: any ProgressDisplay
    private let stopHashing = Atomic<Bool>(false)
    private let onProgress: (@Sendable (_ index: Int, _ bytes: Int64, _ runner: BatchRunner) -> Void)?
    /// Whether the display hid the cursor (to show it again on an abrupt exit).
    let usesTerminal: Bool

    private let paths: JobPaths
    private var admission: Admission
    /// Operations handed to the queue and not finished yet.
    private var running = 0
    private var model: BatchModel
    private var results: [FileResult?]
    private var remaining: Int
    private var operations: [RequestOperation?]
    /// The order in which files were handed to the queue. curlq hands over only files that may
    /// start at once, so this is the start order.
    private var admissionOrder: [Int: Int] = [:]
    private var indexOf: [ObjectIdentifier: Int] = [:]
    private var timer: (any DispatchSourceTimer)?
    private var continuation: CheckedContinuation<BatchReport, Never>?
    private var isOver = false
    /// `--on-download-complete` runs not returned yet: the batch ends after them.
    private var hooksRunning = 0
    private var interruption: Interruption?
    private var startTime = monotonicSeconds()
    // MARK: --session (GetSession.swift): told of each start and end; `recorded` skip with no request.
    private let session: GetSession?
    private let recorded: Set<Int>
    /// `-J`: the names claimed from the servers and the files moved to them (ServerNames.swift).
    private var serverNames: ServerNames

    init(
        jobs: [Job], options: BatchOptions, display: any ProgressDisplay,
        onProgress: (@Sendable (_ index: Int, _ bytes: Int64, _ runner: BatchRunner) -> Void)? = nil,
        session: GetSession? = nil, recorded: Set<Int> = []
    ) {
        self.session = session
        self.recorded = recorded
        self.options = options
        self.display = display
        self.usesTerminal = display.usesTerminal
        self.onProgress = onProgress
        let maxAttempts = min(max(0, options.retries), 1_000_000) + 1
        self.model = BatchModel(jobs: jobs, maxAttempts: maxAttempts)
        self.results = Array(repeating: nil, count: jobs.count)
        self.remaining = jobs.count
        self.operations = Array(repeating: nil, count: jobs.count)
        self.paths = JobPaths(folder: options.directory)
        self.serverNames = ServerNames(jobs: jobs)
        self.admission = Admission(
            jobs: jobs.filter { $0.plan == .download }.map { ($0.index, Admission.origin(of: $0.url), $0.priority) },
            count: jobs.count, lastInFirstOut: options.order == .lastInFirstOut, perHost: options.perHost)
        // The same limits and order on the queue itself; with admission deciding, nothing waits in it.
        self.requestQueue = RequestQueue(maxConcurrentRequestCount: max(0, options.jobs), queueMode: options.order)
        requestQueue.maxConcurrentRequestsPerHost = max(0, options.perHost)
        self.checkQueue = RequestQueue(maxConcurrentRequestCount: max(0, options.jobs))
        checkQueue.maxConcurrentRequestsPerHost = max(0, options.perHost)
        checkQueue.allowDuplicateRequests = true
        requestQueue.allowDuplicateRequests = true
    }

    /// Runs the batch to its end (or interruption) and returns the results, in input order.
    func run() async -> BatchReport {
        // Subscribe before the first operation is added: only then does the queue watch it.
        let events = requestQueue.events()
        let forwarder = Task { [self] in
            for await event in events { queue.async { self.handle(event) } }
        }
        let report = await withCheckedContinuation { continuation in
            queue.async { self.begin(continuation) }
        }
        forwarder.cancel()
        return report
    }

    /// Cancels every transfer (their `.part` files stay) and ends the batch once they have
    /// let go. Safe from any thread, at any time, more than once.
    func interrupt(_ reason: Interruption) {
        queue.async { [self] in
            guard interruption == nil, !isOver else { return }
            interruption = reason
            model.interruption = reason
            stopHashing.store(true, ordering: .relaxed)
            guard continuation != nil else { return }  // not begun: `begin` starts nothing
            display.note("\(reason.description): cancelling; partial files stay as .part", model)
            let waiting = admission.takeAllWaiting()
            if !waiting.isEmpty { display.note("\(waiting.count) not started", model) }  // not a line each
            for index in waiting {
                finalize(index, outcome: .interrupted, status: nil, attempts: 0, error: reason.description)
            }
            requestQueue.cancelAllRequests()
            checkQueue.cancelAllRequests()
            for split in splits.values { split.cancel() }
            for index in mirrorWaiting.sorted() {  // between two mirrors: nothing to cancel
                finalize(index, outcome: .interrupted, status: nil, attempts: mirrorStates[index]?.tries ?? 0,
                         error: reason.description)
            }
        }
    }

    /// Ctrl-Z: the display gives the terminal back; returns once it has, so the caller may stop
    /// the process. Not to be called on `queue`.
    func suspendDisplay() {
        queue.sync { display.suspend() }
    }

    /// SIGCONT: the display draws itself again.
    func resumeDisplay() {
        queue.async { [self] in display.resume() }
    }

    // MARK: Start

    private func begin(_ continuation: CheckedContinuation<BatchReport, Never>) {
        self.continuation = continuation
        startTime = monotonicSeconds()
        for job in model.jobs {
            switch job.plan {
            case .fail(let reason):
                finalize(job.index, outcome: .failed, status: nil, attempts: 0, error: reason)
            case .skip:
                skip(job)
            case .download:
                break
            }
        }
        if let reason = interruption {
            for index in admission.takeAllWaiting() {
                finalize(index, outcome: .interrupted, status: nil, attempts: 0, error: reason.description)
            }
        }
        admit()
        if let interval = display.refreshInterval, !isOver {
            let timer = DispatchSource.makeTimerSource(queue: queue)
            timer.schedule(deadline: .now(), repeating: interval, leeway: .milliseconds(20))
            timer.setEventHandler { [weak self] in
                guard let self, !self.isOver else { return }
                self.display.refresh(self.model)
            }
            timer.resume()
            self.timer = timer
        }
        checkDone()
    }

    /// Hands the queue the next files while there is room for them to start.
    private func admit() {
        while interruption == nil, options.jobs == 0 || running < options.jobs, let index = admission.take() {
            running += 1
            add(model.jobs[index])
        }
    }

    private func add(_ job: Job) {
        if job.name.contains("/"), let problem = Subfolders.make(of: job.name, in: paths.folder) {
            running -= 1  // never handed to the queue
            admission.finished(job.index)
            return finalize(job.index, outcome: .failed, status: nil, attempts: 0, kind: .file, error: problem)
        }
        // A `.part` started over leaves no ranges file of a split download behind.
        if job.discardedPart != nil { SplitSidecar.remove(SplitSidecar.path(forPart: paths.part(job))) }
        if !job.mirrors.isEmpty { return addMirrorTry(job) }  // Mirrors.swift
        let request = makeRequest(job, url: job.url, resume: job.resumeOffset > 0)
        if options.split > 1, !unsplit.contains(job.index) { return split(job, request) }  // SplitDownload.swift
        let operation = RequestOperation(request: request)
        operation.autoRetry = true
        if !options.retryDNS { operation.autoRetryErrorCodes.remove(.couldNotResolveHost) }
        operation.retryPolicy = RetryPolicy(maxAttempts: model.maxAttempts, retryableStatuses: options.retryHTTP)
        operation.priority = switch job.priority {
        case .high: .high
        case .normal: .normal
        case .low: .low
        }
        operation.callbackQueue = queue
        let index = job.index
        operation.completionHandler = { [self] result in transferFinished(index, result) }
        operations[index] = operation
        admissionOrder[index] = admissionOrder.count + 1
        indexOf[ObjectIdentifier(operation)] = index
        try? requestQueue.add(operation)  // cannot fail: the operation is new
        // `add` has started it: `Admission` applies the queue's own limits, and the queue frees
        // a slot before the completion handler that lets curlq admit the next file. That
        // handler runs on this serial queue, so not before this block ends.
        noteStarted(index)
    }

    /// The request for `job` from `url` (its own, or one of its mirrors).
    private func makeRequest(_ job: Job, url: URL, resume: Bool) -> Request {
        var request = Request(url: url, destination: URL(fileURLWithPath: paths.download(job)), resume: resume)
        request.fileDigests = job.digestsWanted(everything: options.digestEverything)
        request.timeouts = Request.Timeouts(
            connect: options.connectTimeout.map(Self.duration) ?? .seconds(30),
            total: options.timeout.map(Self.duration), idle: options.stallTimeout.map(Self.duration))
        request.tls = options.tls
        request.applyRates(options)  // --speed-limit, --limit-rate, --max-overall-rate (TransferOptions+Rates.swift)
        if let own = job.maxBytesPerSecond { request.maxReceiveSpeed = own }
        let fields = requestHeaders(job, url: url)
        for header in fields { request.addHeader(header.name, header.value) }
        if options.verbose { verbose(Verbose.requestLines(method: "GET", url: url, fields: fields)) }
        return request
    }

    /// A file handed to the queue: its start line, and the deadline of `--max-file-time`.
    private func noteStarted(_ index: Int) {
        model.markStarted(index, at: monotonicSeconds())
        session?.note(.started(index))
        display.started(index, model)
        if let timeout = options.timeout {
            // `--max-file-time` bounds the whole transfer of the file, retries and backoffs included.
            queue.asyncAfter(deadline: .now() + timeout) { [weak self] in
                guard let self, self.results[index] == nil else { return }
                if let split = self.splits[index] {  // -s: its ranges stop, .part and sidecar kept
                    self.model.live[index].timedOut = true
                    return split.cancel()
                }
                if self.mirrorWaiting.contains(index) {  // between two mirrors
                    return self.finalize(index, outcome: .failed, status: nil, attempts: self.mirrorStates[index]?.tries ?? 1,
                                         kind: .timeout, error: "timed out: no complete file after \(Self.seconds(timeout)) (--max-file-time)")
                }
                guard let operation = self.operations[index] else { return }
                self.model.live[index].timedOut = true
                operation.cancel()
            }
        }
    }

    /// A file whose final name is already there is "already there" only once checked: against
    /// its checksum (`sha256=`, `sha512=`, `sha1=`, `md5=`) when one is given, else against the
    /// size the server announces for it (a HEAD request). A file that fails the check is a
    /// failure, never reported as done. The file is hashed only when there is a digest to check
    /// it against, `--json` or not.
    private func skip(_ job: Job) {
        let size = FileKind.size(paths.final(job)) ?? 0
        if recorded.contains(job.index) {  // --session: recorded complete at this size
            finalize(job.index, outcome: .skipped, status: nil, attempts: 0, bytes: size)
            return
        }
        model.live[job.index].phase = .verifying
        guard let checksum = job.checksum else {
            checkAnnouncedSize(job, size: size)
            return
        }
        hash(paths.final(job), [checksum.algorithm]) { [self] digests in
            switch digests {
            case .success(let digests):
                let actual = digests[checksum.algorithm] ?? ""
                if actual != checksum.hex {
                    let name = checksum.algorithm.rawValue
                    finalize(job.index, outcome: .failed, status: nil, attempts: 0, bytes: size, sha256: digests[.sha256], kind: .existingFile,
                             error: "\(job.name) is already there but its \(name) is \(actual), not \(checksum.hex); --overwrite replaces it")
                } else {
                    finalize(job.index, outcome: .skipped, status: nil, attempts: 0, bytes: size, sha256: digests[.sha256])
                }
            case .failure(.stopped):
                finalize(job.index, outcome: .interrupted, status: nil, attempts: 0, bytes: size, error: interruption?.description)
            case .failure(.unreadable(let reason)):
                finalize(job.index, outcome: .failed, status: nil, attempts: 0, bytes: size, error: reason)
            }
        }
    }

    /// Asks the server (HEAD, with the file's headers and TLS options) how big the file is. A
    /// size that differs from the one on disk fails the file; no answer, or no Content-Length,
    /// leaves it skipped, as nothing says it is not complete.
    private func checkAnnouncedSize(_ job: Job, size: Int64) {
        var request = Request(url: job.url, method: .head, tls: options.tls)
        request.timeouts = Request.Timeouts(
            connect: options.connectTimeout.map(Self.duration) ?? .seconds(30), total: .seconds(60))
        for header in requestHeaders(job) { request.addHeader(header.name, header.value) }
        let operation = RequestOperation(request: request)
        operation.callbackQueue = queue
        let index = job.index
        operation.completionHandler = { [self] result in
            var announced: Int64?
            if case .success(let response) = result, (200..<300).contains(response.status.code),
               let field = response.headerFields[.contentLength] {
                announced = Int64(field.trimmingCharacters(in: .whitespaces))
            }
            if case .failure(.cancelled) = result, let interruption {
                finalize(index, outcome: .interrupted, status: nil, attempts: 0, bytes: size, error: interruption.description)
            } else if let announced, announced != size {
                finalize(index, outcome: .failed, status: nil, attempts: 0, bytes: size, kind: .existingFile,
                         error: "\(job.name) is already there but holds \(size) bytes where the server announces \(announced); "
                            + "--overwrite replaces it")
            } else {
                finalize(index, outcome: .skipped, status: nil, attempts: 0, bytes: size)
            }
        }
        try? checkQueue.add(operation)  // cannot fail: the operation is new
    }

    // MARK: Events

    private func handle(_ event: RequestQueue.Event) {
        guard !isOver else { return }
        let now = monotonicSeconds()
        switch event {
        case .added, .started, .finished:
            // The completion handler is the one source of truth for outcomes, and `add` notes
            // the start: either may come before the event, which arrives through another task.
            return
        case .progress(let operation, let download, _):
            // No longer known (nil) once the file's completion handler ran: too late to show.
            guard let index = indexOf[ObjectIdentifier(operation)] else { return }
            model.progress(index, bytes: download.bytesTransferred, total: download.totalBytes, at: now)
            onProgress?(index, download.bytesTransferred, self)
        case .retrying(let operation, let attempt, let delay):
            guard let index = indexOf[ObjectIdentifier(operation)] else { return }
            let seconds = Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18
            model.live[index].attempts = max(model.live[index].attempts, attempt)
            model.live[index].phase = .waitingToRetry(attempt: attempt, at: now + seconds)
            model.live[index].retryReason = Self.retryReason(operation, attempt: attempt)
            display.retrying(index, attempt: attempt, delay: seconds, model)
        }
    }

    // MARK: Finish

    private func transferFinished(_ index: Int, _ result: Result<Response, RequestError>) {
        guard results[index] == nil, let operation = operations[index] else { return }
        operations[index] = nil
        indexOf[ObjectIdentifier(operation)] = nil
        if mirrorStates[index] != nil { return mirrorTryEnded(index, operation, result) }  // keeps its slot
        running -= 1
        admission.finished(index)
        model.live[index].transferEndedAt = monotonicSeconds()
        defer { admit() }
        let job = model.jobs[index]
        let live = model.live[index]
        // It started when it was handed to the queue. The queue's `.retrying` events may come
        // after this completion; the operation's record of its last retry does not (it is set
        // before the retry starts).
        let attempts = max(1, live.attempts, (operation.lastRetriedAttempt?.number ?? 0) + 1)
        switch result {
        case .success(let response):
            let status = response.status.code
            if options.verbose {
                verbose(Verbose.redirectLines(url: job.url, response: response, fields: requestHeaders(job))
                    + Verbose.responseLines(url: job.url, status: status, fields: response.headerFields))
            }
            model.live[index].attempts = response.attempts
            model.live[index].lastModified = response.headerFields[.lastModified]
            if (200..<300).contains(status), response.fileURL != nil {
                let proposed = ServerNames.proposed(
                    job, status: status, contentDisposition: response.headerFields[values: .contentDisposition].first)
                downloaded(job, status: status, attempts: response.attempts, digests: response.fileDigests, proposed: proposed)
            } else {
                let tries = response.attempts > 1 ? " (after \(response.attempts) attempts)" : ""
                finalize(index, outcome: .failed, status: status, attempts: response.attempts,
                         error: ErrorWords.status(status) + tries)
            }
        case .failure(.cancelled) where live.timedOut:
            finalize(index, outcome: .failed, status: nil, attempts: attempts, kind: .timeout,
                     error: "timed out: no complete file after \(Self.seconds(options.timeout ?? 0)) (--max-file-time)")
        case .failure(.cancelled):
            finalize(index, outcome: .interrupted, status: nil, attempts: attempts,
                     error: interruption?.description ?? "cancelled")
        case .failure(let error):
            let tries = attempts > 1 ? " (after \(attempts) attempts)" : ""
            let words = ErrorWords.failure(error, host: job.url.host, dnsRetried: options.retryDNS)
            finalize(index, outcome: .failed, status: nil, attempts: attempts, kind: ErrorWords.kind(error), error: words + tries)
        }
    }

    /// A complete body: checked against the file's checksum, with the digests the transfer
    /// computed as it wrote the bytes, or (when it resumed a `.part`) read back from disk.
    /// `proposed`: with `-J`, the name the response proposed (made safe), moved to once verified.
    private func downloaded(_ job: Job, status: Int, attempts: Int, digests: [DigestAlgorithm: String], proposed: String?) {
        let index = job.index
        let wanted = job.digestsWanted(everything: options.digestEverything)
        guard !wanted.isEmpty else {
            place(job, status: status, attempts: attempts, sha256: nil, proposed: proposed)
            return
        }
        let staged = paths.download(job)
        if wanted.isSubset(of: digests.keys) {
            verified(job, status: status, attempts: attempts, digests: .success(digests), proposed: proposed)
            return
        }
        model.live[index].phase = .verifying
        hash(staged, wanted) { [self] digests in
            verified(job, status: status, attempts: attempts, digests: digests, proposed: proposed)
        }
    }

    private func verified(
        _ job: Job, status: Int, attempts: Int, digests: Result<[DigestAlgorithm: String], SHA256.FileError>, proposed: String?
    ) {
        let index = job.index
        guard let checksum = job.checksum else {
            place(job, status: status, attempts: attempts, sha256: try? digests.get()[.sha256], proposed: proposed)
            return
        }
        let staged = paths.download(job)
        let name = checksum.algorithm.rawValue
        switch digests {
        case .success(let digests) where digests[checksum.algorithm] == checksum.hex:
            place(job, status: status, attempts: attempts, sha256: digests[.sha256], proposed: proposed)
        case .success(let digests):
            unlink(staged)
            if mirrorStates[index] != nil {  // another mirror's bytes may be right
                let got = digests[checksum.algorithm] ?? "nothing"
                return mirrorFailed(index, reason: "\(name) mismatch: expected \(checksum.hex), got \(got); the download was deleted",
                                    kind: .checksum, status: status)
            }
            finalize(index, outcome: .failed, status: status, attempts: attempts, bytes: 0, sha256: digests[.sha256], kind: .checksum,
                     error: "\(name) mismatch: expected \(checksum.hex), got \(digests[checksum.algorithm] ?? "nothing"); the download was deleted")
        case .failure(.stopped):
            finalize(index, outcome: .interrupted, status: status, attempts: attempts,
                     error: "\(interruption?.description ?? "stopped") while checking \(name) (the download is kept as \(staged))")
        case .failure(.unreadable(let reason)):
            finalize(index, outcome: .failed, status: status, attempts: attempts, error: reason)
        }
    }

    /// The complete and verified file at the download path: moved to its final name, the URL's
    /// (when a checksum kept it at `NAME.unverified`), or with `-J` the one its response
    /// proposed. A server's name that cannot be taken (a file already there) fails the file,
    /// which stays, whole, under the URL's name.
    private func place(_ job: Job, status: Int, attempts: Int, sha256: String?, proposed: String?) {
        let index = job.index
        let staged = paths.download(job)
        let final = paths.final(job)
        switch serverNames.move(job, from: staged, proposed: proposed, folder: paths.folder) {
        case .moved:
            finalize(index, outcome: .downloaded, status: status, attempts: attempts, sha256: sha256)
        case .refused(let name, EEXIST):
            // A run again of a -J batch: the same bytes already there under the server's name are
            // that file, already there, not a duplicate to keep and fail on.
            let target = paths.folder + "/" + name
            hashQueue.async { [self] in
                let same = ServerNames.sameContents(staged, target)
                queue.async { [self] in
                    guard results[index] == nil else { return }
                    guard same, unlink(staged) == 0 else {
                        return refused(job, name: name, code: EEXIST, status: status, attempts: attempts, sha256: sha256)
                    }
                    serverNames.adopt(job, name: name)
                    finalize(index, outcome: .skipped, status: status, attempts: attempts, bytes: FileKind.size(target), sha256: sha256)
                }
            }
        case .refused(let name, let code):
            refused(job, name: name, code: code, status: status, attempts: attempts, sha256: sha256)
        case .unchanged where staged == final:
            finalize(index, outcome: .downloaded, status: status, attempts: attempts, sha256: sha256)
        case .unchanged:
            if rename(staged, final) == 0 {
                finalize(index, outcome: .downloaded, status: status, attempts: attempts, sha256: sha256)
            } else {
                let reason = String(cString: strerror(errno))
                finalize(index, outcome: .failed, status: status, attempts: attempts, sha256: sha256,
                         error: "cannot move \(staged) to \(final): \(reason)")
            }
        }
    }

    /// `-J`: the server's name cannot be taken; the download stays, whole, under the URL's name
    /// (never replacing a file there), and the file fails.
    private func refused(_ job: Job, name: String, code: Int32, status: Int, attempts: Int, sha256: String?) {
        let index = job.index
        let staged = paths.download(job)
        let final = paths.final(job)
        var kept = staged
        if staged != final, link(staged, final) == 0 {  // verified: it may take the URL's name, never replacing one
            unlink(staged)
            kept = final
        }
        let why = code == EEXIST
            ? "which is already there with other bytes (-J never replaces a file)" : "but it cannot take that name (\(String(cString: strerror(code))))"
        finalize(index, outcome: .failed, status: status, attempts: attempts, bytes: FileKind.size(kept), sha256: sha256,
                 kind: code == EEXIST ? .existingFile : .file,
                 error: "the server names it \(name), \(why); the download is kept as \((kept as NSString).lastPathComponent)")
    }

    /// Hashes a file on the hashing queue, then calls `completion` on `queue`.
    private func hash(
        _ path: String, _ algorithms: Set<DigestAlgorithm>,
        completion: @escaping @Sendable (Result<[DigestAlgorithm: String], SHA256.FileError>) -> Void
    ) {
        hashQueue.async { [self] in
            let result: Result<[DigestAlgorithm: String], SHA256.FileError>
            do throws(SHA256.FileError) {
                result = .success(try FileDigests.hex(algorithms, ofFileAt: path) { self.stopHashing.load(ordering: .relaxed) })
            } catch {
                result = .failure(error)
            }
            queue.async { completion(result) }
        }
    }

    private func finalize(
        _ index: Int, outcome: FileResult.Outcome, status: Int?, attempts: Int,
        bytes: Int64? = nil, sha256: String? = nil, kind: FileResult.ErrorKind? = nil, error: String? = nil
    ) {
        guard results[index] == nil else { return }
        let job = model.jobs[index]
        let path = serverNames.placed[index].map { paths.folder + "/" + $0 } ?? paths.final(job)  // -J: the server's name
        let onDisk = bytes ?? (outcome == .downloaded ? FileKind.size(path) : FileKind.size(paths.part(job))) ?? 0
        let now = monotonicSeconds()
        let seconds = model.live[index].startedAt.map { now - $0 } ?? 0
        let transferSeconds = model.live[index].startedAt.map { (model.live[index].transferEndedAt ?? now) - $0 } ?? 0
        if outcome == .downloaded { model.settle(index, bytesOnDisk: onDisk, whole: status != 206) }
        if outcome == .downloaded, options.remoteTime, let text = model.live[index].lastModified, let date = HTTPDate.parse(text) {
            Self.setModificationTime(path, date)  // -R: as curl, a file without one keeps the time it was written
        }
        let status = status ?? (outcome == .interrupted ? bodyStatus(index, partSize: onDisk) : nil)
        var result = Self.classified(FileResult(
            url: job.url, path: path, outcome: outcome, status: status, bytes: onDisk,
            sha256: sha256, attempts: attempts, seconds: seconds,
            error: outcome == .downloaded || outcome == .skipped ? nil : error ?? "failed",
            fetched: model.live[index].fetched, transferSeconds: transferSeconds,
            startOrder: admissionOrder[index] ?? 0), kind: kind, paths: paths, job: job)
        var mirrorsHeld = false
        if let state = mirrorStates[index] {
            result.mirrors = state.report
            mirrorWaiting.remove(index)
            mirrorsHeld = mirrorSlots.remove(index) != nil
            if mirrorsHeld {  // its slot, held across tries (Mirrors.swift)
                running -= 1
                admission.finished(index)
            }
        }
        result.nameFromServer = serverNames.placed[index] != nil
        results[index] = result
        if outcome == .downloaded, let hook = options.hook {
            hooksRunning += 1
            hook.run(path: path, url: job.url, bytes: onDisk, sha256: sha256) { [self] ended in
                queue.async { [self] in hookEnded(index, ended) }
            }
        }
        session?.note(.finished(index, result))
        remaining -= 1
        model.finish(index, result)
        display.finished(index, result, model)
        checkDone()
        if mirrorsHeld { admit() }
    }

    /// `-R`: `date` as the access and modification times of the file at `path` (not through a link).
    static func setModificationTime(_ path: String, _ date: Date) {
        let seconds = date.timeIntervalSince1970.rounded(.down)
        let time = timespec(tv_sec: Int(seconds), tv_nsec: 0)
        var times = [time, time]
        _ = utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW)
    }

    /// The status of the response whose body an interrupted transfer was writing: only a 2xx
    /// body goes to the `.part`, so a `.part` that grew in this run had one, a 206 when it
    /// resumed the bytes of an earlier run, else a 200 (the transfer's own status is not kept
    /// past a cancel). Nil when no body had begun.
    private func bodyStatus(_ index: Int, partSize: Int64) -> Int? {
        let live = model.live[index]
        let before = live.restarted ? 0 : model.jobs[index].resumeOffset
        // The size on disk says it even before a progress report reached this queue (they come
        // through another task, late under load); a discarded `.part` may still hold an earlier
        // run's bytes until the new body begins, so then only a report says it began.
        guard partSize > before, live.fetched > 0 || model.jobs[index].discardedPart == nil else { return nil }
        return before > 0 ? 206 : 200
    }

    /// `--on-download-complete` returned for file `index`: noted in its result, said when it failed.
    private func hookEnded(_ index: Int, _ outcome: DownloadHook.Outcome) {
        hooksRunning -= 1
        results[index]?.hook = outcome
        if !outcome.succeeded, let result = results[index] {
            display.note("\((result.path as NSString).lastPathComponent): --on-download-complete \(outcome.words)", model)
        }
        checkDone()
    }

    private func checkDone() {
        guard remaining == 0, hooksRunning == 0, let continuation, !isOver else { return }
        isOver = true
        self.continuation = nil
        timer?.cancel()
        timer = nil
        display.end(model)
        continuation.resume(returning: BatchReport(
            results: results.map { $0! }, interruption: interruption, seconds: monotonicSeconds() - startTime,
            bytesReceived: model.received, directory: options.directory))
    }

    // MARK: -s/--split (SplitDownload.swift)

    /// Split downloads running, by file index.
    private var splits: [Int: SplitDownload] = [:]
    /// Files the probe found unsplittable, now downloaded over one connection.
    private var unsplit: Set<Int> = []

    /// Starts `job` as a split download; it takes its admission slot until it ends.
    private func split(_ job: Job, _ request: Request) {
        let index = job.index
        let connections = options.perHost > 0 ? min(options.split, options.perHost) : options.split
        let download = SplitDownload(
            base: request, download: paths.download(job), count: connections, maxAttempts: model.maxAttempts, queue: queue,
            onProgress: { [self] done, total in
                model.progress(index, bytes: done, total: total, at: monotonicSeconds())
                onProgress?(index, done, self)
            },
            completion: { [self] outcome in splitEnded(job, outcome) })
        splits[index] = download
        admissionOrder[index] = admissionOrder.count + 1
        noteStarted(index)
        download.start()
    }

    private func splitEnded(_ job: Job, _ outcome: SplitDownload.Outcome) {
        let index = job.index
        splits[index] = nil
        guard results[index] == nil else { return }
        if case .fallback(let reason) = outcome, interruption == nil {
            display.note("\(job.name): one connection: \(reason)", model)
            unsplit.insert(index)
            admissionOrder[index] = nil
            add(job)
            return
        }
        running -= 1
        admission.finished(index)
        model.live[index].transferEndedAt = monotonicSeconds()
        defer { admit() }
        switch outcome {
        case .done(let attempts, let resumed, let contentDisposition, let lastModified):
            model.live[index].attempts = attempts
            model.live[index].lastModified = lastModified
            let proposed = ServerNames.proposed(job, status: 200, contentDisposition: contentDisposition)
            downloaded(job, status: resumed ? 206 : 200, attempts: attempts, digests: [:], proposed: proposed)
        case .failed(let reason, let status, let attempts):
            finalize(index, outcome: .failed, status: status, attempts: attempts, error: reason)
        case .interrupted where model.live[index].timedOut && interruption == nil:
            finalize(index, outcome: .failed, status: nil, attempts: max(1, model.live[index].attempts),
                     error: "timed out: no complete file after \(Self.seconds(options.timeout ?? 0)) (--max-file-time)")
        case .interrupted, .fallback:
            finalize(index, outcome: .interrupted, status: nil, attempts: max(1, model.live[index].attempts),
                     error: interruption?.description ?? "cancelled")
        }
    }

    // MARK: Mirrors (Mirrors.swift)

    /// Files with mirrors that have started, by file index.
    private var mirrorStates: [Int: MirrorState] = [:]
    /// Files with mirrors that hold their admission slot (from their first try to their end).
    private var mirrorSlots: Set<Int> = []
    /// Files with mirrors waiting for their next try (no operation to cancel meanwhile).
    private var mirrorWaiting: Set<Int> = []

    /// Starts the next try of a file with mirrors, on `state.current`: one attempt, no retries
    /// of the engine's own (a retry goes to the next mirror, see ``mirrorFailed``). A `.part`
    /// is resumed only from the mirror that wrote it, or with a checksum to judge the result;
    /// else it is started over, and a note says so.
    private func addMirrorTry(_ job: Job) {
        let index = job.index
        let part = paths.part(job)
        var state = mirrorStates[index] ?? MirrorState(
            job: job, maxAttempts: model.maxAttempts,
            partFrom: job.resumeOffset > 0 ? MirrorRules.partSource(part, urls: [job.url] + job.mirrors) : nil)
        let first = state.tries == 0
        state.tries += 1
        let mirror = state.current
        let partSize = FileKind.of(part) == .file ? FileKind.size(part) ?? 0 : 0
        var resume = false
        var note: String?  // said after the start line
        // The first try keeps the planner's decision to discard a `.part` (its start line says so).
        if partSize > 0, !first || job.resumeOffset > 0 {
            let from = state.partFrom.map(state.name) ?? "a URL no longer on its line"
            if state.partFrom == mirror {
                resume = true
            } else if let checksum = job.checksum {
                MirrorRules.dropValidator(part)
                resume = true
                note = "\(job.name): resuming the \(Format.bytes(partSize)) .part from \(from) on \(state.name(mirror)) "
                    + "without If-Range (the other server's validator means nothing here): its \(checksum.algorithm.rawValue) decides"
            } else {
                note = "\(job.name): starting over on \(state.name(mirror)): the \(Format.bytes(partSize)) .part came from "
                    + "\(from), and without a checksum nothing would catch two servers' bytes spliced together"
                if first { model.jobs[index].resumeOffset = 0 }  // the start line must not say "resuming"
            }
        }
        state.partSizeBefore = resume ? partSize : 0
        mirrorStates[index] = state
        let operation = RequestOperation(request: makeRequest(job, url: state.urls[mirror], resume: resume))
        operation.autoRetry = false
        operation.priority = switch job.priority {
        case .high: .high
        case .normal: .normal
        case .low: .low
        }
        operation.callbackQueue = queue
        operation.completionHandler = { [self] result in transferFinished(index, result) }
        operations[index] = operation
        indexOf[ObjectIdentifier(operation)] = index
        if first {
            mirrorSlots.insert(index)
            admissionOrder[index] = admissionOrder.count + 1
        }
        try? requestQueue.add(operation)  // cannot fail: the operation is new
        if first {
            noteStarted(index)
            if let note { display.note(note, model) }
            if options.split > 1 {
                display.note("\(job.name): one connection: a file with mirrors is fetched from one mirror at a time (-s is for files of one URL)", model)
            }
        } else {
            model.live[index].phase = .running
            model.live[index].attempts = state.tries
            if let note { display.note(note, model) }
        }
    }

    /// A try of a file with mirrors ended: a complete body goes on to its checks; a failure
    /// another mirror could fix goes to the next one; anything else ends the file.
    private func mirrorTryEnded(_ index: Int, _ operation: RequestOperation, _ result: Result<Response, RequestError>) {
        model.live[index].transferEndedAt = monotonicSeconds()
        guard var state = mirrorStates[index] else { return }
        let job = model.jobs[index]
        let mirror = state.current
        let url = state.urls[mirror]
        // Which mirror's bytes the `.part` now holds: this one's, if the try wrote any.
        let part = paths.part(job)
        if FileKind.of(part) == .file, let size = FileKind.size(part), size > 0 {
            if size != state.partSizeBefore {
                state.partFrom = mirror
                MirrorRules.markSource(part, url)
            }
        } else {
            state.partFrom = nil
        }
        mirrorStates[index] = state
        switch result {
        case .success(let response):
            let status = response.status.code
            if options.verbose {
                verbose(Verbose.redirectLines(url: url, response: response, fields: requestHeaders(job, url: url))
                    + Verbose.responseLines(url: url, status: status, fields: response.headerFields))
            }
            if (200..<300).contains(status), response.fileURL != nil {
                mirrorStates[index]?.served = mirror
                model.live[index].attempts = state.tries
                model.live[index].lastModified = response.headerFields[.lastModified]
                let proposed = ServerNames.proposed(
                    job, status: status, contentDisposition: response.headerFields[values: .contentDisposition].first)
                downloaded(job, status: status, attempts: state.tries, digests: response.fileDigests, proposed: proposed)
                return
            }
            let reason = ErrorWords.status(status)
            if MirrorRules.otherMirrorMayFix(status: status, retryHTTP: options.retryHTTP) {
                mirrorFailed(index, reason: reason, kind: .http, status: status)
            } else {
                mirrorStates[index]?.failures.append(MirrorFailure(mirror: mirror, url: url, reason: reason, kind: .http, status: status))
                finalize(index, outcome: .failed, status: status, attempts: state.tries, kind: .http,
                         error: "\(reason) from \(state.name(mirror)): the request itself is refused, so no other mirror was tried")
            }
        case .failure(.cancelled) where model.live[index].timedOut:
            finalize(index, outcome: .failed, status: nil, attempts: state.tries, kind: .timeout,
                     error: "timed out: no complete file after \(Self.seconds(options.timeout ?? 0)) (--max-file-time)")
        case .failure(.cancelled):
            finalize(index, outcome: .interrupted, status: nil, attempts: state.tries, error: interruption?.description ?? "cancelled")
        case .failure(let error):
            let words = ErrorWords.failure(error, host: url.host, dnsRetried: options.retryDNS)
            let kind = ErrorWords.kind(error)
            guard MirrorRules.otherMirrorMayFix(error) else {
                mirrorStates[index]?.failures.append(MirrorFailure(mirror: mirror, url: url, reason: words, kind: kind, status: nil))
                return finalize(index, outcome: .failed, status: nil, attempts: state.tries, kind: kind, error: words)
            }
            if error.transportFailure?.code == .couldNotResolveHost, !options.retryDNS {
                mirrorStates[index]?.dropped.insert(mirror)  // not retried, as a file without mirrors
            }
            mirrorFailed(index, reason: words, kind: kind, status: nil)
        }
    }

    /// The try on `state.current` failed in a way another mirror could fix: the next mirror
    /// (no wait: another server), or after a whole round the first again (after a backoff),
    /// while tries are left; else the file fails, naming every mirror and why.
    private func mirrorFailed(_ index: Int, reason: String, kind: FileResult.ErrorKind, status: Int?) {
        guard results[index] == nil, var state = mirrorStates[index] else { return }
        let job = model.jobs[index]
        let mirror = state.current
        if FileKind.size(paths.part(job)) == nil { state.partFrom = nil }
        state.failures.append(MirrorFailure(mirror: mirror, url: state.urls[mirror], reason: reason, kind: kind, status: status))
        state.served = nil
        mirrorStates[index] = state
        if let interruption {
            return finalize(index, outcome: .interrupted, status: status, attempts: state.tries, error: interruption.description)
        }
        guard state.tries < state.maxTries, let next = state.next() else {
            return finalize(index, outcome: .failed, status: status, attempts: state.tries, kind: kind, error: state.summary())
        }
        if next.wrapped { state.rounds += 1 }
        let delay = next.wrapped ? state.roundBackoff() : 0
        state.current = next.index
        mirrorStates[index] = state
        model.live[index].attempts = state.tries
        model.live[index].attemptLimit = state.maxTries
        model.live[index].retryReason = "\(reason) from \(state.name(mirror)); next: \(state.name(next.index))"
        model.live[index].phase = .waitingToRetry(attempt: state.tries + 1, at: monotonicSeconds() + delay)
        display.retrying(index, attempt: state.tries + 1, delay: delay, model)
        mirrorWaiting.insert(index)
        queue.asyncAfter(deadline: .now() + delay) { [weak self] in
            guard let self, self.mirrorWaiting.remove(index) != nil, self.results[index] == nil, self.interruption == nil else { return }
            self.addMirrorTry(self.model.jobs[index])
        }
    }

    // MARK: Helpers

    /// `-v` lines: above the live area on a terminal, else straight to standard error.
    private func verbose(_ lines: [String]) {
        if display.usesTerminal {
            for line in lines { display.note(line, model) }
        } else {
            Output.error(lines.map { Format.safe($0) + "\n" }.joined())
        }
    }

    /// `-H`, the entry's `header=` lines, the User-Agent, then the credentials for its URL (the fields the
    /// others do not already set).
    /// For a mirror on another origin than the file's first URL, the secret fields of `-H`,
    /// `header=` and `-u` stay behind (``MirrorRules/isForeign(_:first:)``).
    private func requestHeaders(_ job: Job, url: URL? = nil) -> [HeaderField] {
        let url = url ?? job.url
        var fields = HeaderField.forRequest(global: options.headers, own: job.headers, userAgent: options.userAgent)
        var credentials = options.credentials
        if MirrorRules.isForeign(url, first: job.url) {
            fields.removeAll { MirrorRules.secretFields.contains($0.name.lowercased()) }
            credentials.user = nil
            credentials.cookieText = nil
        }
        return fields + credentials.fields(for: url, besides: fields)
    }

    static func duration(_ seconds: Double) -> Duration {
        .nanoseconds(Int64(min(seconds, 1e9) * 1e9))
    }

    static func seconds(_ value: Double) -> String {
        value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
    }
}
