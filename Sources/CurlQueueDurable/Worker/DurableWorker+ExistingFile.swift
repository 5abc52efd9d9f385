import CurlQueue
import CurlQueueDownloads
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension DurableWorker {
    /// What stands where a job's download goes, and what the job does about it.
    enum ExistingFile {
        /// Nothing: download.
        case absent
        /// A file is there: this operation checks it; its outcome is the job's.
        case check(RequestOperation)
        /// The outcome was sent already (a folder or link in the way, a checksum checked).
        case decided
    }

    /// `curlq get`'s rule for a name that is taken: a file there is never replaced, unless it is
    /// the job's own unrecorded download (``isOwnOutput(_:job:)``). It is
    /// "already there" (`.completed`, with the file's size and no transfer) once checked against
    /// the job's checksum when it has one, else against the size the server announces (a HEAD
    /// with the job's fields and TLS options; no answer, or no `Content-Length`, leaves it
    /// standing as complete, as nothing says it is not). A file that fails the check fails the
    /// job as ``CurlQueueDownloads/DownloadFailureKind/existingFile``, and stays. A folder, a
    /// symbolic link or anything but a file at the name (or at its `.part`) fails it as `.file`.
    func existingFile(
        _ request: Request, job: JobRecord, continuation: AsyncStream<Event>.Continuation
    ) -> ExistingFile {
        guard let staged = request.destination, let name = job.spec.request.destination else { return .absent }
        let destination = configuration.folder.appendingPathComponent(name)
        let id = job.id
        func decide(_ outcome: JobOutcome) -> ExistingFile {
            continuation.yield(.transferEnded(id, outcome, nil))
            return .decided
        }
        for path in Set([staged.path + ".part", staged.path, destination.path]).sorted() {
            switch FileKind.of(path) {
            case .missing, .file: continue
            case .directory: return decide(.failed(reason: "\(path) exists and is a folder", kind: .file))
            case .symbolicLink: return decide(.failed(reason: "refusing to write through the symbolic link \(path)", kind: .file))
            case .other: return decide(.failed(reason: "\(path) exists and is not a regular file", kind: .file))
            }
        }
        guard FileKind.of(destination.path) == .file, !configuration.replacesExistingFiles,
              !Self.isOwnOutput(destination.path, job: id) else { return .absent }
        let size = FileKind.size(destination.path) ?? 0
        if let checksum = job.spec.request.checksum, let algorithm = DigestAlgorithm(rawValue: checksum.algorithm.lowercased()) {
            let actual = (try? FileDigests.hex([algorithm], ofFileAt: destination.path)[algorithm]) ?? nil
            guard let actual else {
                return decide(.failed(reason: "\(name) is already there and cannot be read to check its \(algorithm.rawValue)", kind: .file))
            }
            guard actual == checksum.hex.lowercased() else {
                return decide(.failed(
                    reason: "\(name) is already there but its \(algorithm.rawValue) is \(actual), not \(checksum.hex.lowercased()); --overwrite replaces it",
                    kind: .existingFile))
            }
            let sha256 = algorithm == .sha256 ? actual : nil
            return decide(.completed(JobResult(status: 0, bytes: size, file: name, sha256: sha256, alreadyThere: true)))
        }
        var head = Request(url: request.url, method: .head, tls: request.tls)
        head.headerFields = request.headerFields
        head.fieldsAllowedAcrossOrigins = request.fieldsAllowedAcrossOrigins
        head.timeouts = Request.Timeouts(connect: request.timeouts.connect ?? .seconds(30), total: .seconds(60))
        let operation = RequestOperation(request: head)
        operation.priority = RequestOperation.Priority(rawValue: job.spec.priority.rawValue) ?? .normal
        operation.autoRetry = false
        operation.completionHandler = { result in
            var announced: Int64?
            if case .success(let response) = result, (200..<300).contains(response.status.code),
               let field = response.headerFields[.contentLength] {
                announced = Int64(field.trimmingCharacters(in: .whitespaces))
            }
            let outcome: JobOutcome
            if case .failure(.cancelled) = result {
                outcome = .cancelled(reason: "cancelled")
            } else if let announced, announced != size {
                outcome = .failed(
                    reason: "\(name) is already there but holds \(size) bytes where the server announces \(announced); --overwrite replaces it",
                    kind: .existingFile)
            } else {
                outcome = .completed(JobResult(status: 0, bytes: size, file: name, alreadyThere: true))
            }
            continuation.yield(.transferEnded(id, outcome, nil))
        }
        return .check(operation)
    }

    /// Whether the file at `path` is this job's own download, moved into place by an earlier
    /// attempt whose outcome was never recorded (its finished mark names the job, in any boot):
    /// not a file of someone else's, so the new download may replace it (a mark of another
    /// boot says its bytes may not have reached the disk).
    static func isOwnOutput(_ path: String, job: JobID) -> Bool {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { _ = close(fd) }
        return attribute(finishedAttribute, of: fd)?.hasSuffix(" \(job)") == true
    }

    /// A verified download at `staged` moved to the job's name: by a new link, so that nothing
    /// there is ever replaced, except the job's own unrecorded file (renamed over). A name
    /// taken meanwhile fails the job (`existingFile`), the download kept as `NAME.unverified`.
    /// `replacing` (``Configuration/replacesExistingFiles``): renamed over whatever is there.
    static func placeVerified(_ staged: URL, at final: URL, outcome: JobOutcome, job: JobID, replacing: Bool) -> JobOutcome {
        if replacing, rename(staged.path, final.path) == 0 {
            flushFolder(of: final.path)
            return outcome
        }
        if link(staged.path, final.path) == 0 {
            unlink(staged.path)
            flushFolder(of: final.path)
            return outcome
        }
        let code = errno
        if code == EEXIST, isOwnOutput(final.path, job: job), rename(staged.path, final.path) == 0 {
            flushFolder(of: final.path)
            return outcome
        }
        let why = code == EEXIST ? "a file appeared under that name meanwhile (never replaced)" : String(cString: strerror(code))
        return .failed(reason: "cannot move the verified \(staged.lastPathComponent) to \(final.lastPathComponent): \(why); it is kept as \(staged.lastPathComponent)",
                       kind: code == EEXIST ? .existingFile : .file)
    }
}
