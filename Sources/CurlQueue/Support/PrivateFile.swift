package import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Whole-file reads and writes for files that hold secrets or must never be half-written (the
/// disk cache's entries, stored tokens): never through a symbolic link, new files 0600, and
/// replacement by rename only.
package enum PrivateFile {
    /// The contents of the regular file at `path`, or nil if it is missing, not a regular file
    /// (a symbolic link included), larger than `maxSize`, or cannot be read whole.
    package static func contents(at path: String, maxSize: Int = .max) -> Data? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size <= maxSize else { return nil }
        var data = Data(count: Int(info.st_size))
        var filled = 0
        let complete = data.withUnsafeMutableBytes { buffer -> Bool in
            while filled < buffer.count {
                let count = read(descriptor, buffer.baseAddress! + filled, buffer.count - filled)
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { return false }
                filled += count
            }
            return true
        }
        return complete ? data : nil
    }

    /// Writes `data` to a new temporary file beside `path` (created 0600) and renames it over
    /// `path`. Returns false, leaving `path` as it was and no temporary file, on any failure.
    /// With `durable`, the data is flushed to disk before the rename.
    @discardableResult
    package static func replace(at path: String, with data: Data, durable: Bool = false) -> Bool {
        let url = URL(fileURLWithPath: path)
        let temporary = url.deletingLastPathComponent()
            .appendingPathComponent(temporaryPrefix + UUID().uuidString).path
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else { return false }
        let written = data.withUnsafeBytes { buffer -> Bool in
            var offset = 0
            while offset < buffer.count {
                let count = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { return false }
                offset += count
            }
            return true
        }
        let flushed = written && (!durable || fsync(descriptor) == 0)
        close(descriptor)
        guard flushed, rename(temporary, path) == 0 else {
            unlink(temporary)
            return false
        }
        return true
    }

    /// The name prefix of the temporary files ``replace(at:with:durable:)`` makes.
    package static let temporaryPrefix = ".tmp-"
}
