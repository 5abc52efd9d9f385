import CurlQueueDownloads
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The output folder made and checked before the first request, with reasons in `strerror`'s
/// words: Foundation's `createDirectory` reported a file in the way as "NSCocoaErrorDomain
/// error 512", and a folder that cannot be written to was found only when every transfer failed.
enum FolderCheck {
    /// Creates the folder at the absolute `path` and its missing parents (`mkdir -p`); nil on
    /// success, else why, naming the part that is in the way.
    static func create(_ path: String) -> String? {
        var prefix = ""
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            prefix += "/" + part
            var info = stat()
            if stat(prefix, &info) == 0 {
                if info.st_mode & S_IFMT == S_IFDIR { continue }
                return "\(quoted(prefix)) is a file, not a folder"
            }
            if mkdir(prefix, 0o777) != 0, errno != EEXIST {
                return "cannot make \(quoted(prefix)): \(String(cString: strerror(errno)))"
            }
        }
        return nil
    }

    /// Nil when a file can be created in `folder`, else why not. Found by creating (and
    /// removing) an empty file: permissions alone do not tell (root ignores them; a read-only
    /// mount or a full quota does not show in them).
    static func cannotWrite(into folder: String) -> String? {
        let probe = folder + "/.curlq-write-check-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let descriptor = open(probe, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return String(cString: strerror(errno)) }
        close(descriptor)
        unlink(probe)
        return nil
    }
}
