import CCurl  // for <sys/xattr.h>, which Glibc leaves out
import CurlQueue
import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension DurableWorker {
    /// The extended attribute in which the core keeps a `.part` file's validator
    /// (`DestinationFile.validatorAttribute` in CurlQueue).
    static let validatorAttribute = PartFileAttribute.validator

    /// This boot of the machine: Linux's `/proc/sys/kernel/random/boot_id`, nil where there is none.
    static let currentBootID: String? = {
        guard let text = try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8) else { return nil }
        let id = text.trimmingCharacters(in: .whitespacesAndNewlines)
        return id.isEmpty ? nil : id
    }()

    /// When this boot began: `btime` of `/proc/stat`, nil where there is none.
    static let currentBootTime: Date? = {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix("btime ") }),
              let seconds = TimeInterval(line.dropFirst(6).trimmingCharacters(in: .whitespaces)) else { return nil }
        return Date(timeIntervalSince1970: seconds)
    }()

    static var log: Logger { Logger(label: "CurlQueueDurable") }

    /// ``checkpoints(_:)`` on a thread of its own: an `fsync` may wait for the disk, and must
    /// hold neither the worker's event loop nor a thread of the cooperative pool.
    func flushedCheckpoints(_ jobs: [ClaimedJob]) async -> [JobID: Checkpoint] {
        guard !jobs.isEmpty else { return [:] }
        return await withCheckedContinuation { continuation in
            DispatchQueue.global(qos: .utility).async { continuation.resume(returning: self.checkpoints(jobs)) }
        }
    }

    /// The progress of the given running downloads: bytes of their `.part` files that are on
    /// disk (not only in the page cache), with the validator they were fetched with and this
    /// boot. One `fsync` per running download per heartbeat: it writes back what the kernel
    /// would write within its 30 s anyway, a little earlier.
    func checkpoints(_ jobs: [ClaimedJob]) -> [JobID: Checkpoint] {
        var result: [JobID: Checkpoint] = [:]
        for job in jobs where job.recorded == nil {
            guard let destination = job.record.spec.request.stagedDestination else { continue }
            let part = configuration.folder.appendingPathComponent(destination).path + ".part"
            let fd = open(part, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
            guard fd >= 0 else { continue }
            defer { _ = close(fd) }
            var info = stat()
            guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { continue }
            // The size first, then the flush: every byte under that size was written before
            // fsync was called, so it is on disk once fsync returns (bytes written meanwhile
            // may be too; they are not counted).
            guard fsync(fd) == 0 else { continue }
            let (id, bytes, now) = (job.lease.job, Int64(info.st_size), ContinuousClock.now)
            let (total, speed) = registry.withLock { registry -> (Int64?, Double?) in
                let last = registry.lastSamples[id]
                registry.lastSamples[id] = (bytes, now)
                guard let last, bytes >= last.bytes else { return (registry.totals[id], nil) }
                let seconds = (now - last.at).seconds
                return (registry.totals[id], seconds > 0 ? Double(bytes - last.bytes) / seconds : nil)
            }
            result[id] = Checkpoint(
                bytes: bytes, validator: Self.attribute(Self.validatorAttribute, of: fd), node: configuration.node,
                bootID: configuration.bootID, total: total, bytesPerSecond: speed, recordedAt: Date())
        }
        return result
    }

    /// What ``checkPartAfterReboot(_:checkpoint:job:)`` did.
    enum PartAfterReboot: Equatable {
        /// Nothing: no `.part`, or no reason to doubt it.
        case kept
        /// Cut to the checkpoint's bytes.
        case truncated(from: Int64, to: Int64)
        /// Removed: its validator is not the one its checkpoint's bytes were fetched with.
        case discarded
    }

    /// Before resuming a claimed job: when its checkpoint was recorded on this machine in another
    /// boot, a power loss may have left its `.part` with a tail that never reached the disk (zeros,
    /// or a size its data never had). Bytes past the checkpoint's are not trusted: a longer `.part`
    /// is truncated to them; a shorter one is resumed as it is. A `.part` whose validator is not
    /// the checkpoint's (gone, or another response's) is removed, as its bytes cannot be vouched
    /// for. With no checkpoint of a boot (a download shorter than a heartbeat), a `.part` last
    /// written before this boot began is removed: nothing vouches for any of its bytes. In the
    /// same boot nothing is done: the page cache holds every byte a killed process wrote. A
    /// `.part` another transfer holds locked, or that is not a regular file of its own, is left
    /// to the core, which never resumes those.
    @discardableResult
    func checkPartAfterReboot(_ part: String, checkpoint: Checkpoint?, job: JobID) -> PartAfterReboot {
        let vouched = checkpoint.flatMap { $0.bootID == nil ? nil : $0 }
        if let vouched {
            guard vouched.node == configuration.node, let then = vouched.bootID, let now = configuration.bootID, then != now else {
                return .kept
            }
        } else if configuration.bootTime == nil {
            return .kept
        }
        let fd = open(part, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return .kept }
        defer { _ = close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_nlink == 1,
              flock(fd, LOCK_EX | LOCK_NB) == 0 else { return .kept }
        let size = Int64(info.st_size)
        // Removes the name only while it is still the file opened (nothing else took it meanwhile).
        func remove() {
            var named = stat()
            if lstat(part, &named) == 0, named.st_dev == info.st_dev, named.st_ino == info.st_ino { unlink(part) }
        }
        guard let checkpoint = vouched else {
            let written = Date(timeIntervalSince1970: TimeInterval(info.st_mtim.tv_sec) + TimeInterval(info.st_mtim.tv_nsec) / 1e9)
            guard let bootTime = configuration.bootTime, written < bootTime else { return .kept }
            remove()
            Self.log.notice("after a reboot: .part with no checkpoint of a boot removed, its bytes cannot be vouched for",
                            metadata: ["job": "\(job)", "part": "\(part)", "size": "\(size)"])
            return .discarded
        }
        let metadata: Logger.Metadata = ["job": "\(job)", "part": "\(part)", "checkpoint": "\(checkpoint.bytes)", "size": "\(size)"]
        if Self.attribute(Self.validatorAttribute, of: fd) != checkpoint.validator {
            remove()
            Self.log.notice("after a reboot: .part removed, its validator is not its checkpoint's", metadata: metadata)
            return .discarded
        }
        guard size > checkpoint.bytes else { return .kept }
        guard ftruncate(fd, off_t(checkpoint.bytes)) == 0 else {
            let reason = String(cString: strerror(errno))
            // Not resumable as it is: removed, so the download starts again whole.
            remove()
            Self.log.warning("after a reboot: .part removed, it could not be truncated: \(reason)", metadata: metadata)
            return .discarded
        }
        Self.log.notice("after a reboot: .part truncated to its checkpoint before resuming", metadata: metadata)
        return .truncated(from: size, to: checkpoint.bytes)
    }
}
