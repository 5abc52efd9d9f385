import CurlQueue
import CurlQueueDownloads
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `-J/--remote-header-name`: the names the servers proposed (``ContentDisposition``), and the
/// complete files moved to them. Kept by ``BatchRunner`` on its queue.
///
/// A file is downloaded, resumed and verified under its URL's name, as without `-J`; only once
/// it is complete and verified does it move, in the same folder, to the name its (final)
/// response proposed. The name is claimed in the batch first (``NameAllocator``, seeded with
/// every planned name), so two files that get one name, or a name that is another file's of the
/// batch (or its `.part`), end as `NAME` and `NAME.1`: no file of the batch replaces another.
/// The move itself never replaces anything on disk (a hard link, which fails when the name is
/// taken, then the old name's removal): a file already there under the server's name, from
/// before this run, stays, and the download stays under the URL's name, reported as failed.
struct ServerNames {
    private var allocator = NameAllocator()
    /// The name each file moved to, by file index.
    private(set) var placed: [Int: String] = [:]

    init(jobs: [Job]) {
        guard jobs.contains(where: \.takesServerName) else { return }
        for job in jobs { _ = allocator.claim(job.name) }
    }

    enum Placement: Equatable {
        /// No `-J` for this file, no usable name proposed, or the URL's own: it stays where it is.
        case unchanged
        /// Moved to `path`.
        case moved(path: String)
        /// Not moved: `name` could not be taken (`errno`; `EEXIST`: something is there).
        case refused(name: String, errno: Int32)
    }

    /// The name `job`'s response proposes in its `Content-Disposition` field, made safe; nil
    /// without `-J` for this file, for a status other than 2xx, or when the response has none.
    /// A resumed file's 206 that carries none gives nil: the file keeps its URL's name.
    static func proposed(_ job: Job, status: Int, contentDisposition: String?) -> String? {
        guard job.takesServerName, (200..<300).contains(status) else { return nil }
        return ContentDisposition.safeName(contentDisposition)
    }

    /// The file already under the server's name `name` holds the same bytes as the download,
    /// which was dropped (a run again of a `-J` batch): the file counts as already there.
    mutating func adopt(_ job: Job, name: String) {
        placed[job.index] = name
    }

    /// Whether the regular files at `a` and `b` hold the same bytes (read in 64 KiB blocks;
    /// a link at `b` is not followed). Blocking: call it off the batch queue.
    static func sameContents(_ a: String, _ b: String) -> Bool {
        var infoA = stat(), infoB = stat()
        guard lstat(a, &infoA) == 0, lstat(b, &infoB) == 0, (infoA.st_mode & S_IFMT) == S_IFREG,
              (infoB.st_mode & S_IFMT) == S_IFREG, infoA.st_size == infoB.st_size else { return false }
        let fa = open(a, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), fb = open(b, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        defer {
            if fa >= 0 { close(fa) }
            if fb >= 0 { close(fb) }
        }
        guard fa >= 0, fb >= 0 else { return false }
        let size = 64 * 1024
        var bufferA = [UInt8](repeating: 0, count: size), bufferB = [UInt8](repeating: 0, count: size)
        while true {
            let countA = readFull(fa, &bufferA), countB = readFull(fb, &bufferB)
            guard countA >= 0, countA == countB else { return false }
            if countA == 0 { return true }
            guard bufferA[0..<countA] == bufferB[0..<countB] else { return false }
        }
    }

    /// Reads until `buffer` is full or the file ends; the count, or -1 on an error.
    private static func readFull(_ descriptor: Int32, _ buffer: inout [UInt8]) -> Int {
        var total = 0
        while total < buffer.count {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + total, $0.count - total) }
            if count < 0, errno == EINTR { continue }
            if count < 0 { return -1 }
            if count == 0 { break }
            total += count
        }
        return total
    }

    /// Moves the complete file at `staged` to the name proposed for it, unless that is its URL's.
    mutating func move(_ job: Job, from staged: String, proposed: String?, folder: String) -> Placement {
        // A `dir=` file stays in its folder: only its last component is the server's.
        let folderPart = job.name.lastIndex(of: "/").map { String(job.name[...$0]) } ?? ""
        guard job.takesServerName, let proposed, folderPart + proposed != job.name else { return .unchanged }
        let name = allocator.claim(folderPart + proposed)
        let target = folder + "/" + name
        // link(2) fails with EEXIST whatever stands there (a file, a folder, a dangling symbolic
        // link) and follows no link at the new name: nothing is replaced, nothing written elsewhere.
        guard link(staged, target) == 0 else { return .refused(name: name, errno: errno) }
        unlink(staged)
        placed[job.index] = name
        return .moved(path: target)
    }
}
