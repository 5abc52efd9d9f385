import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Liveness of the workers on this machine through `flock`: each worker holds an exclusive
/// lock on `<database>-workers/<id>.lock` for its whole life, and the kernel drops a lock when
/// its process dies, `kill -9` included. So a lock that can be taken is a dead worker's, at
/// once, with no TTL to wait for. A lock is per open file description: another open of the
/// same file, even in the owner's process, cannot take it while the owner holds it.
struct WorkerLocks: Sendable {
    let folder: String

    init(databasePath: String) {
        folder = databasePath + "-workers"
    }

    private func path(_ worker: String) -> String {
        folder + "/" + worker.map { $0.isLetter || $0.isNumber || $0 == "-" ? $0 : "_" }.reduce(into: "") { $0.append($1) } + ".lock"
    }

    /// Takes the worker's lock; returns its descriptor, kept open for the worker's life.
    func acquire(_ worker: String) throws -> Int32 {
        if mkdir(folder, 0o700) != 0 && errno != EEXIST {
            throw SQLiteError(code: 14, message: "cannot create \(folder): \(String(cString: strerror(errno)))")
        }
        let descriptor = open(path(worker), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else {
            throw SQLiteError(code: 14, message: "cannot open a lock in \(folder): \(String(cString: strerror(errno)))")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            close(descriptor)
            throw SQLiteError(code: 5, message: "worker \(worker) is already running")
        }
        return descriptor
    }

    /// Drops the lock and its file (the worker unregistered).
    func release(_ worker: String, descriptor: Int32) {
        unlink(path(worker))
        close(descriptor)
    }

    /// Whether the worker's process is gone: true when its lock file can be locked (its owner
    /// died) or is missing, false when another holds it. Nil when this cannot be told (an
    /// error opening the file): the TTL decides then.
    func isDead(_ worker: String) -> Bool? {
        let file = path(worker)
        let descriptor = open(file, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        if descriptor < 0 { return errno == ENOENT ? true : nil }
        defer { close(descriptor) }
        if flock(descriptor, LOCK_EX | LOCK_NB) == 0 {
            unlink(file)
            return true
        }
        return errno == EWOULDBLOCK ? false : nil
    }
}
