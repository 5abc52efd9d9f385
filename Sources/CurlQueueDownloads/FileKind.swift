#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What stands at a path, without following a symbolic link: what `get` and the durable worker
/// look at before they write a download's name (never through a link, never over a folder).
package enum FileKind: Equatable, Sendable {
    case missing, file, directory, symbolicLink, other

    /// What stands at `path` (`lstat`).
    package static func of(_ path: String) -> FileKind {
        var info = stat()
        guard lstat(path, &info) == 0 else { return .missing }
        switch info.st_mode & S_IFMT {
        case S_IFREG: return .file
        case S_IFDIR: return .directory
        case S_IFLNK: return .symbolicLink
        default: return .other
        }
    }

    /// The size of a file (following links), or nil.
    package static func size(_ path: String) -> Int64? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Int64(info.st_size)
    }
}
