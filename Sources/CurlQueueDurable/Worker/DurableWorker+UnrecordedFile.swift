import CCurl  // for <sys/xattr.h>, which Glibc leaves out
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
/// keeps the validator its `.part` had and the boot it finished in; a claim that finds such a
/// file and no `.part` moves it back to `.part`, and the core's resume asks for the bytes past
/// its end with `If-Range`: a 416 for exactly its length completes it, a changed resource comes
/// whole (200).
extension DurableWorker {
    /// The extended attribute naming the boot in which a finished download awaits its record.
    static let finishedInBootAttribute = "user.curlqueue.boot"

    /// Marks a download the core just renamed into place with the boot it finished in, before
    /// the flush and the `finish` that records it.
    static func markFinished(_ file: URL, bootID: String?) {
        guard let bootID else { return }
        _ = bootID.withCString { lsetxattr(file.path, finishedInBootAttribute, $0, strlen($0), 0) }
    }

    /// Once the outcome is recorded the file is the user's alone: no attribute of ours on it.
    static func forgetFinished(_ file: URL) {
        _ = lremovexattr(file.path, finishedInBootAttribute)
        _ = lremovexattr(file.path, validatorAttribute)
    }

    /// Before resuming a claimed download that has no `.part`: when `destination` is a finished
    /// file of a download whose outcome was not recorded (it keeps a validator), and its bytes
    /// are known to be whole (it finished in this boot, or the job's checkpoint was taken in
    /// this boot on this node, so no power loss came between its writes and now), it becomes the
    /// `.part` again. Returns whether it did. Anything else (no validator, another boot, a link,
    /// a `.part` already there) is left as it is, and the download runs as before.
    @discardableResult
    func reclaimUnrecordedFile(_ destination: String, checkpoint: Checkpoint?, job: JobID) -> Bool {
        let part = destination + ".part"
        var info = stat()
        guard let now = configuration.bootID, lstat(part, &info) != 0, errno == ENOENT else { return false }
        let fd = open(destination, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { _ = close(fd) }
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_nlink == 1,
              let validator = Self.attribute(Self.validatorAttribute, of: fd), Self.isUsableValidator(validator) else { return false }
        let finishedHere = Self.attribute(Self.finishedInBootAttribute, of: fd) == now
        let checkpointedHere = checkpoint.map { $0.node == configuration.node && $0.bootID == now } ?? false
        guard finishedHere || checkpointedHere else { return false }
        // link + unlink, not rename: a `.part` that appeared meanwhile is never replaced.
        guard link(destination, part) == 0 else { return false }
        var linked = stat()
        guard lstat(part, &linked) == 0, linked.st_dev == info.st_dev, linked.st_ino == info.st_ino else {
            // The destination changed between the check and the link: the new name goes again.
            unlink(part)
            return false
        }
        unlink(destination)
        _ = fremovexattr(fd, Self.finishedInBootAttribute)
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
