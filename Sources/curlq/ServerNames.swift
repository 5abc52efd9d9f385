import CurlQueue
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

    /// Moves the complete file at `staged` to the name proposed for it, unless that is its URL's.
    mutating func move(_ job: Job, from staged: String, proposed: String?, folder: String) -> Placement {
        guard job.takesServerName, let proposed, proposed != job.name else { return .unchanged }
        let name = allocator.claim(proposed)
        let target = folder + "/" + name
        // link(2) fails with EEXIST whatever stands there (a file, a folder, a dangling symbolic
        // link) and follows no link at the new name: nothing is replaced, nothing written elsewhere.
        guard link(staged, target) == 0 else { return .refused(name: name, errno: errno) }
        unlink(staged)
        placed[job.index] = name
        return .moved(path: target)
    }
}
