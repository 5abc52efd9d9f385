import CCurl  // for <sys/xattr.h>, which Glibc leaves out
import CurlQueue
import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A download renamed into place whose outcome never reached the store: the worker was killed
/// after the rename and before `finish` (mostly while it flushed the file). The next attempt
/// would fetch the whole file again. Instead, until its outcome is recorded, a finished file
/// keeps the validator its `.part` had and a mark naming the boot it finished in and its job; a
/// claim of that job in the same boot that finds it and no `.part` moves it back to `.part`,
/// and the core's resume asks for the bytes past its end with `If-Range`: a 416 for exactly its
/// length completes it, a changed resource comes whole (200).
extension DurableWorker {
    /// The extended attribute of a finished download awaiting its record: "BOOT JOB".
    static let finishedAttribute = PartFileAttribute.finished

    static func finishedMark(bootID: String, job: JobID) -> String { "\(bootID) \(job)" }

    /// Marks a download of `job` the core just renamed into place with the boot it finished
    /// in, before the flush and the `finish` that records it.
    static func markFinished(_ file: URL, bootID: String?, job: JobID) {
        guard let bootID else { return }
        _ = finishedMark(bootID: bootID, job: job).withCString { lsetxattr(file.path, finishedAttribute, $0, strlen($0), 0) }
    }

    /// Once the outcome is recorded the file is the user's alone: no attribute of ours on it.
    /// The validator goes first: a file left with only the mark is never taken back.
    static func forgetFinished(_ file: URL) {
        _ = lremovexattr(file.path, validatorAttribute)
        _ = lremovexattr(file.path, PartFileAttribute.source)
        _ = lremovexattr(file.path, finishedAttribute)
    }

    /// Before resuming a claimed download that has no `.part`: when `destination` is a finished
    /// file of this job whose outcome was not recorded (it keeps a validator, and the mark of
    /// this job in this boot: no power loss came between its writes and now, the page cache
    /// holds them all), it is flushed and becomes the `.part` again. Returns whether it did.
    /// Anything else (another job's file, another boot's, no validator, a link, a `.part`
    /// already there) is left as it is, and the download runs as before.
    @discardableResult
    func reclaimUnrecordedFile(_ destination: String, job: JobID) -> Bool {
        let part = destination + ".part"
        var info = stat()
        guard let now = configuration.bootID, lstat(part, &info) != 0, errno == ENOENT else { return false }
        let fd = open(destination, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { _ = close(fd) }
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_nlink == 1,
              Self.attribute(Self.finishedAttribute, of: fd) == Self.finishedMark(bootID: now, job: job),
              let validator = Self.attribute(Self.validatorAttribute, of: fd), Self.isUsableValidator(validator)
        else { return false }
        // Its flush was cut short: on disk before it is believed, so a power loss from here on
        // cannot leave a `.part` whose tail a 416 would vouch for.
        guard fsync(fd) == 0 else { return false }
        // link + unlink, not rename: a `.part` that appeared meanwhile is never replaced.
        guard link(destination, part) == 0 else { return false }
        var linked = stat()
        guard lstat(part, &linked) == 0, linked.st_dev == info.st_dev, linked.st_ino == info.st_ino else {
            // The destination changed between the check and the link: the new name goes again.
            unlink(part)
            return false
        }
        unlink(destination)
        _ = fremovexattr(fd, Self.finishedAttribute)
        Self.flushFolder(of: destination)
        Self.log.notice(
            "a finished download whose outcome was not recorded: back to .part, to be confirmed with If-Range",
            metadata: ["job": "\(job)", "file": "\(destination)", "bytes": "\(info.st_size)"])
        return true
    }

    /// The value of the extended attribute `name` of the file open at `fd`, if any.
    static func attribute(_ name: String, of fd: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: 1025)
        let count = fgetxattr(fd, name, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count], as: UTF8.self)
    }

    /// Printable ASCII of at most 1 KiB, as the core requires of a validator it sends.
    private static func isUsableValidator(_ value: String) -> Bool {
        value.utf8.count <= 1024 && value.utf8.allSatisfy { (0x20...0x7E).contains($0) }
    }
}
