import CurlQueue
import CurlQueueDownloads
import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One file fetched as several byte ranges at once (`-s/--split N`), written with `pwrite` at
/// their offsets into ONE `<download>.part` (no extra copy), renamed to `<download>` only when
/// every range is complete. ``SplitSidecar`` records each range's progress next to it, so a
/// rerun (after Ctrl-C, a crash, a failure) resumes every range where it stopped.
///
/// A probe (`Range: bytes=0-0`) decides: only a `206` with a complete length and a validator
/// (a strong `ETag`, else `Last-Modified`) is split; anything else falls back to one connection
/// (``Outcome/fallback(_:)``). Each range is a streamed request (`Range: bytes=A-B`, `If-Range`
/// with the validator); a range whose connection fails is retried alone from its last byte
/// written, up to the batch's attempts. A `200` instead of a `206` (the file changed on the
/// server) fails the file and drops the sidecar: a rerun starts over.
///
/// The ranges go through a queue of their own, with at most `ranges` transfers: a split file
/// takes one of `-j`'s slots and opens up to N connections (at most `--per-host` when set).
///
/// Everything mutable is touched only on `queue` (the batch runner's serial queue: the
/// operations' handlers run there), hence `@unchecked Sendable`.
final class SplitDownload: @unchecked Sendable {
    enum Outcome {
        /// Every range arrived and the `.part` was renamed to the download path. `resumed`: some
        /// bytes came from an earlier run. `contentDisposition`: the probe's (for `-J`).
        /// `lastModified`: the probe's (for `-R`).
        case done(attempts: Int, resumed: Bool, contentDisposition: String?, lastModified: String?)
        /// Not splittable: download it over one connection; the reason says why.
        case fallback(String)
        case failed(String, status: Int?, attempts: Int)
        case interrupted
    }

    private let queue: DispatchQueue
    private let base: Request
    private let download: String
    private let partPath: String
    private let sidecarPath: String
    private let count: Int
    /// Whether the ranges of an earlier run (the sidecar) may be resumed: not with `--restart`.
    private let resumes: Bool
    private let maxAttempts: Int
    private let rangeQueue: RequestQueue
    private let onProgress: (_ done: Int64, _ total: Int64) -> Void
    private var completion: ((Outcome) -> Void)?

    private var sidecar: SplitSidecar?
    private var descriptor: Int32 = -1
    private var running: [Int: RequestOperation] = [:]
    private var attempts: [Int] = []
    private var resumed = false
    private var probeHead: ResponseHead?
    /// Ranges waiting to be asked again.
    private var retrying: Set<Int> = []
    /// Ranges whose current response is the 206 asked for (only their bytes are written).
    private var accepted: Set<Int> = []
    private var cancelled = false
    private var failure: (String, Int?)?
    private var dirty = false
    private var timer: (any DispatchSourceTimer)?

    /// - Parameters:
    ///   - base: The request for the file (headers, TLS, timeouts, rates); its destination is
    ///     ignored.
    ///   - download: Where the complete file goes; the ranges are written to `<download>.part`.
    init(
        base: Request, download: String, count: Int, maxAttempts: Int, queue: DispatchQueue,
        onProgress: @escaping (_ done: Int64, _ total: Int64) -> Void, completion: @escaping (Outcome) -> Void
    ) {
        var base = base
        self.resumes = base.resume
        base.destination = nil
        base.resume = false
        base.fileDigests = []
        let count = max(1, min(count, SplitSidecar.maxRanges))
        // --limit-rate holds for the file, as aria2's per-download limit: its ranges share one
        // budget. With --max-overall-rate too (a request has one shared limit), each of the
        // `count` ranges gets an equal share of it instead, which keeps the file under its limit.
        if let limit = base.maxReceiveSpeed {
            if base.sharedReceiveLimit == nil {
                base.sharedReceiveLimit = SharedRateLimit(bytesPerSecond: limit)
                base.maxReceiveSpeed = nil
            } else {
                base.maxReceiveSpeed = max(1, limit / Int64(count))
            }
        }
        self.base = base
        self.download = download
        self.partPath = download + ".part"
        self.sidecarPath = SplitSidecar.path(forPart: download + ".part")
        self.count = count
        self.maxAttempts = max(1, maxAttempts)
        self.queue = queue
        self.onProgress = onProgress
        self.completion = completion
        self.rangeQueue = RequestQueue(maxConcurrentRequestCount: self.count)
        rangeQueue.allowDuplicateRequests = true
    }

    // MARK: Probe

    /// Starts with the probe. Call on `queue`.
    func start() {
        var request = base
        request.addHeader("Range", "bytes=0-0")
        let operation = RequestOperation(request: request)
        operation.autoRetry = true
        operation.retryPolicy = RetryPolicy(maxAttempts: maxAttempts)
        operation.callbackQueue = queue
        // The head decides; the body (one byte, or a whole file from a server that ignores
        // Range) is not wanted: a head other than the 206 asked for cancels the probe.
        operation.responseHeadHandler = { [self, weak operation] head in
            probeHead = head
            if head.status.code != 206 { operation?.cancel() }
        }
        operation.responseBodyHandler = { _ in }
        operation.completionHandler = { [self] result in probed(result) }
        running[-1] = operation
        try? rangeQueue.add(operation)  // cannot fail: the operation is new
    }

    private func probed(_ result: Result<Response, RequestError>) {
        running[-1] = nil
        guard !cancelled else { return finish(.interrupted) }
        guard let head = probeHead else {
            if case .failure(.cancelled) = result { return finish(.interrupted) }
            return finish(.fallback("the range probe failed"))
        }
        guard head.status.code == 206 else {
            return finish(.fallback("the server answered a range request with \(head.status.code), not 206"))
        }
        guard let total = Self.completeLength(head.headerFields[.contentRange]), total > 0 else {
            return finish(.fallback("the server announced no complete length"))
        }
        guard let validator = Self.validator(eTag: head.headerFields[.eTag], lastModified: head.headerFields[.lastModified]) else {
            return finish(.fallback("the server sent no ETag or Last-Modified to keep the ranges of one version together"))
        }
        prepare(validator: validator, total: total)
    }

    /// `bytes A-B/TOTAL` → TOTAL.
    static func completeLength(_ value: String?) -> Int64? {
        guard let value, let slash = value.lastIndex(of: "/") else { return nil }
        return Int64(value[value.index(after: slash)...].trimmingCharacters(in: .whitespaces))
    }

    /// `bytes A-B/TOTAL` → A.
    static func firstByte(_ value: String?) -> Int64? {
        guard let value, value.hasPrefix("bytes "), let dash = value.firstIndex(of: "-") else { return nil }
        return Int64(value[value.index(value.startIndex, offsetBy: 6)..<dash].trimmingCharacters(in: .whitespaces))
    }

    /// A strong ETag, else Last-Modified, when it may go into `If-Range` as it is.
    static func validator(eTag: String?, lastModified: String?) -> String? {
        func usable(_ value: String) -> Bool {
            !value.isEmpty && value.utf8.count <= 1024 && value.utf8.allSatisfy { (0x20...0x7E).contains($0) }
        }
        if let etag = eTag, !etag.hasPrefix("W/"), usable(etag) { return etag }
        if let date = lastModified, usable(date) { return date }
        return nil
    }

    // MARK: The .part file

    private func prepare(validator: String, total: Int64) {
        if resumes, let kept = SplitSidecar.read(sidecarPath), kept.validator == validator, kept.total == total,
           let fd = openExisting(size: total) {
            sidecar = kept
            descriptor = fd
            resumed = kept.doneBytes > 0
        } else {
            SplitSidecar.remove(sidecarPath)
            guard let fd = createFresh(size: total) else {
                return finish(.failed("cannot create \(partPath): \(String(cString: strerror(errno)))", status: nil, attempts: 1))
            }
            descriptor = fd
            sidecar = SplitSidecar.fresh(validator: validator, total: total, count: count)
        }
        sidecar!.write(sidecarPath)
        attempts = Array(repeating: 0, count: sidecar!.ranges.count)
        onProgress(sidecar!.doneBytes, total)
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + 1, repeating: 1, leeway: .milliseconds(100))
        timer.setEventHandler { [weak self] in self?.saveIfDirty() }
        timer.resume()
        self.timer = timer
        for index in sidecar!.ranges.indices where !sidecar!.ranges[index].isComplete { startRange(index) }
        checkFinished()
    }

    /// The `.part` of an earlier run: a regular file of its own, of exactly the file's length.
    private func openExisting(size: Int64) -> Int32? {
        let fd = open(partPath, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_nlink == 1, Int64(info.st_size) == size else {
            close(fd)
            return nil
        }
        return fd
    }

    /// A new `.part` of the file's length (sparse), ours alone: whatever stood there goes (a
    /// link goes, not its target) and `O_EXCL | O_NOFOLLOW` refuses anything planted since.
    private func createFresh(size: Int64) -> Int32? {
        var info = stat()
        if lstat(partPath, &info) == 0, (info.st_mode & S_IFMT) != S_IFDIR { unlink(partPath) }
        let fd = open(partPath, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return nil }
        guard ftruncate(fd, off_t(size)) == 0 else {
            close(fd)
            return nil
        }
        return fd
    }

    // MARK: Ranges

    private func startRange(_ index: Int) {
        guard let piece = sidecar?.ranges[index], !cancelled, failure == nil else { return checkFinished() }
        attempts[index] += 1
        var request = base
        request.addHeader("Range", "bytes=\(piece.next)-\(piece.last)")
        request.addHeader("If-Range", sidecar!.validator)
        let operation = RequestOperation(request: request)
        operation.autoRetry = true
        operation.retryPolicy = RetryPolicy(maxAttempts: maxAttempts)
        operation.callbackQueue = queue
        accepted.remove(index)
        operation.responseHeadHandler = { [self] head in
            if head.status.code == 206 && Self.firstByte(head.headerFields[.contentRange]) == piece.next {
                accepted.insert(index)
            } else {
                let status = head.status.code
                fail(status == 200 ? "the file changed on the server (200 to a range with If-Range); run again to start over"
                                   : "HTTP \(status) to the range \(piece.next)-\(piece.last)", status: status)
            }
        }
        operation.responseBodyHandler = { [self] data in
            if accepted.contains(index) { write(data, range: index) }
        }
        operation.completionHandler = { [self] result in rangeEnded(index, result) }
        running[index] = operation
        try? rangeQueue.add(operation)  // cannot fail: the operation is new
    }

    /// Writes a chunk of range `index` at its offset; never past the range's last byte.
    private func write(_ data: Data, range index: Int) {
        guard descriptor >= 0, failure == nil, var piece = sidecar?.ranges[index] else { return }
        let room = piece.length - piece.done
        guard Int64(data.count) <= room else {
            fail("the server sent more than the range \(piece.first)-\(piece.last)", status: 206)
            return
        }
        let ok = data.withUnsafeBytes { bytes -> Bool in
            var offset = 0
            while offset < bytes.count {
                let written = pwrite(descriptor, bytes.baseAddress! + offset, bytes.count - offset, off_t(piece.next) + off_t(offset))
                if written < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                offset += written
            }
            return true
        }
        guard ok else {
            fail("cannot write \(partPath): \(String(cString: strerror(errno)))", status: nil)
            return
        }
        piece.done += Int64(data.count)
        sidecar!.ranges[index] = piece
        dirty = true
        onProgress(sidecar!.doneBytes, sidecar!.total)
    }

    private func rangeEnded(_ index: Int, _ result: Result<Response, RequestError>) {
        running[index] = nil
        guard let piece = sidecar?.ranges[index] else { return }
        if !piece.isComplete, !cancelled, failure == nil {
            if case .success(let response) = result, response.status.code != 206 {
                fail("HTTP \(response.status.code) to the range \(piece.next)-\(piece.last)", status: response.status.code)
            } else if attempts[index] < maxAttempts {
                saveIfDirty()
                // This range alone is asked again, from its last byte written, after a pause.
                retrying.insert(index)
                queue.asyncAfter(deadline: .now() + .milliseconds(500)) { [self] in
                    retrying.remove(index)
                    startRange(index)
                }
                return
            } else {
                let words: String
                if case .failure(let error) = result { words = ErrorWords.failure(error, host: base.url.host, dnsRetried: true) } else {
                    words = "the range \(piece.next)-\(piece.last) ended early"
                }
                fail(words + " (after \(attempts[index]) attempts)", status: nil)
            }
        }
        checkFinished()
    }

    private func fail(_ reason: String, status: Int?) {
        guard failure == nil else { return }
        failure = (reason, status)
        for operation in running.values { operation.cancel() }
    }

    /// Cancels every range; the `.part` and its sidecar stay for a rerun. Call on `queue`.
    func cancel() {
        guard !cancelled else { return }
        cancelled = true
        for operation in running.values { operation.cancel() }
        if sidecar == nil, running.isEmpty { finish(.interrupted) }
    }

    private func saveIfDirty() {
        guard dirty, let sidecar else { return }
        dirty = false
        sidecar.write(sidecarPath)
    }

    private func checkFinished() {
        guard running.isEmpty, retrying.isEmpty, let sidecar, completion != nil else { return }
        let totalAttempts = attempts.max() ?? 1
        if let failure {
            dirty = true
            saveIfDirty()
            if failure.1 == 200 { SplitSidecar.remove(sidecarPath) }
            return finish(.failed(failure.0, status: failure.1, attempts: totalAttempts))
        }
        if cancelled || !sidecar.isComplete {
            dirty = true
            saveIfDirty()
            return finish(.interrupted)
        }
        closeFile()
        guard rename(partPath, download) == 0 else {
            return finish(.failed("cannot move \(partPath) to \(download): \(String(cString: strerror(errno)))", status: nil,
                                  attempts: totalAttempts))
        }
        SplitSidecar.remove(sidecarPath)
        finish(.done(attempts: totalAttempts, resumed: resumed,
                     contentDisposition: probeHead?.headerFields[values: .contentDisposition].first,
                     lastModified: probeHead?.headerFields[.lastModified]))
    }

    private func closeFile() {
        if descriptor >= 0 {
            close(descriptor)
            descriptor = -1
        }
    }

    private func finish(_ outcome: Outcome) {
        timer?.cancel()
        timer = nil
        closeFile()
        guard let completion else { return }
        self.completion = nil
        completion(outcome)
    }
}
