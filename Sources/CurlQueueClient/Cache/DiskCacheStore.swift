import CurlQueue
public import Foundation
import HTTPTypes
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A response cache store in a folder: one file per entry, least recently used entries
/// removed once the files pass a size limit.
///
/// - Writes are atomic: an entry is written to a temporary file in the folder and renamed
///   over the old one, so a reader sees the old entry or the new one, never a mix.
/// - Every entry carries its key, its body's length and its body's SHA-256. A file that is
///   truncated, damaged, of another format or of another key is a miss (and is removed),
///   never a crash and never a wrong response.
/// - File names are hashes of the keys: no key, however hostile, names a path outside the
///   folder.
/// - Files are created readable by their owner only (0600), the folder 0700 when created.
/// - What is written: per entry, the key (the method, the URL without user and password, and
///   for a request with credentials their HMAC-SHA-256 with the store's secret), the
///   response's status, header fields (never a `Set-Cookie`) and body, its times, and the
///   request's values of the fields its `Vary` names (credential fields left out). No
///   credential is written in clear. The secret, 32 random bytes, is the file
///   ``partitionSecretFileName`` (0600); someone who can read the folder can read the cached
///   bodies, and test guesses of a credential against the keys, so keep the folder private.
///   A new secret (the file removed or damaged) makes every entry stored for credentials a
///   miss.
///
/// Safe to use from any thread of one process. Two processes may share a folder without
/// damage, but each keeps its own view of the folder's size.
public final class DiskCacheStore: ResponseCacheStore {
    /// The folder the entries live in.
    public let folder: URL
    /// The most bytes the entries' files hold together; passing it removes the least recently
    /// used entries until the files fit in 90% of it. The entry being stored is never one of
    /// them: one that fits the limit on its own is kept, if need be alone.
    public let byteLimit: Int64

    /// The store's random secret (``ResponseCacheStore/partitionSecret``), kept in the folder
    /// so that entries stored for credentials are found again after a restart.
    public let partitionSecret: [UInt8]
    /// True: every call reads or writes files (``ResponseCacheStore/blocksOnIO``), so a
    /// ``ResponseCache`` calls it off the Swift concurrency pool.
    public var blocksOnIO: Bool { true }

    /// The name of the file in the folder that holds ``partitionSecret``.
    public static let partitionSecretFileName = "partition-secret"

    private let index: Locked<Index>

    private struct Index {
        var files: [String: (size: Int64, lastUse: UInt64)] = [:]
        var bytes: Int64 = 0
        var clock: UInt64 = 0
    }

    /// Opens (creating it if needed) a store in `folder`, holding at most `byteLimit` bytes.
    ///
    /// Entries already in the folder are kept, least recently used first by their files'
    /// modification times. Temporary files left by an interrupted write are removed. Throws
    /// if the folder cannot be created or read, or its ``partitionSecret`` cannot be written.
    public init(folder: URL, byteLimit: Int64 = 256 * 1024 * 1024) throws {
        self.folder = folder
        self.byteLimit = max(0, byteLimit)
        try FileManager.default.createDirectory(
            at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        partitionSecret = try Self.loadOrCreateSecret(in: folder)
        var found: [(name: String, size: Int64, modified: Double)] = []
        for name in try FileManager.default.contentsOfDirectory(atPath: folder.path) {
            let path = folder.appendingPathComponent(name).path
            if name.hasPrefix(Self.temporaryPrefix) {
                unlink(path)
                continue
            }
            guard name.hasSuffix(Self.fileSuffix) else { continue }
            var info = stat()
            guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { continue }
            let modified = Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
            found.append((name, Int64(info.st_size), modified))
        }
        var initial = Index()
        for entry in found.sorted(by: { $0.modified < $1.modified }) {
            initial.clock += 1
            initial.files[entry.name] = (entry.size, initial.clock)
            initial.bytes += entry.size
        }
        index = Locked(initial)
        evictIfNeeded()
    }

    /// The bytes the entries' files hold now.
    public var byteCount: Int64 { index.withLock { $0.bytes } }

    /// The number of entries now.
    public var count: Int { index.withLock { $0.files.count } }

    public func cachedResponse(forKey key: String) -> CachedResponse? {
        let name = Self.fileName(for: key)
        let path = folder.appendingPathComponent(name).path
        guard let data = PrivateFile.contents(at: path) else {
            forget(name)
            return nil
        }
        guard let response = DiskCacheEntry.decode(data, key: key) else {
            // Damaged, truncated or another key's: a miss, and the file goes.
            unlink(path)
            forget(name)
            return nil
        }
        index.withLock { index in
            index.clock += 1
            if let known = index.files[name] {
                index.files[name] = (known.size, index.clock)
            } else {
                index.files[name] = (Int64(data.count), index.clock)
                index.bytes += Int64(data.count)
            }
        }
        // The order survives a restart through the files' modification times.
        utimensat(AT_FDCWD, path, nil, 0)
        return response
    }

    public func store(_ response: CachedResponse, forKey key: String) {
        let data = DiskCacheEntry.encode(response, key: key)
        guard Int64(data.count) <= byteLimit else {
            removeCachedResponse(forKey: key)
            return
        }
        let name = Self.fileName(for: key)
        // A damaged entry is a miss, so no fsync: a crash costs at most a refetch.
        guard PrivateFile.replace(at: folder.appendingPathComponent(name).path, with: data) else { return }
        index.withLock { index in
            index.clock += 1
            index.bytes += Int64(data.count) - (index.files[name]?.size ?? 0)
            index.files[name] = (Int64(data.count), index.clock)
        }
        evictIfNeeded(keeping: name)
    }

    public func removeCachedResponse(forKey key: String) {
        let name = Self.fileName(for: key)
        unlink(folder.appendingPathComponent(name).path)
        forget(name)
    }

    public func removeAll() {
        let names = index.withLock { index in
            let names = Array(index.files.keys)
            index = Index()
            return names
        }
        for name in names { unlink(folder.appendingPathComponent(name).path) }
    }

    private func forget(_ name: String) {
        index.withLock { index in
            if let known = index.files.removeValue(forKey: name) { index.bytes -= known.size }
        }
    }

    /// Removes least recently used entries until the files fit in 90% of the limit, or only
    /// `kept` (the entry just stored, which fits the limit on its own) is left.
    private func evictIfNeeded(keeping kept: String? = nil) {
        let victims: [String] = index.withLock { index in
            guard index.bytes > byteLimit else { return [] }
            let target = byteLimit / 10 * 9
            var victims: [String] = []
            for (name, entry) in index.files.sorted(by: { $0.value.lastUse < $1.value.lastUse }) where name != kept {
                guard index.bytes > target else { break }
                index.files[name] = nil
                index.bytes -= entry.size
                victims.append(name)
            }
            return victims
        }
        for name in victims { unlink(folder.appendingPathComponent(name).path) }
    }

    /// The secret in the folder, or a new one written there (0600) if there is none or it is
    /// damaged. Two processes opening a new folder at once agree on one: the file is linked
    /// into place only if absent, and then read back.
    private static func loadOrCreateSecret(in folder: URL) throws -> [UInt8] {
        let path = folder.appendingPathComponent(partitionSecretFileName).path
        if let data = PrivateFile.contents(at: path, maxSize: 64), data.count == 32 { return Array(data) }
        let fresh = Data(CachePartition.randomSecret())
        let temporary = folder.appendingPathComponent(temporaryPrefix + UUID().uuidString).path
        guard PrivateFile.replace(at: temporary, with: fresh) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path])
        }
        defer { unlink(temporary) }
        if link(temporary, path) != 0 {
            // Another process made one first, or a damaged one is in the way.
            if let data = PrivateFile.contents(at: path, maxSize: 64), data.count == 32 { return Array(data) }
            guard rename(temporary, path) == 0 else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path]) }
        }
        return Array(fresh)
    }

    static let fileSuffix = ".cache"
    static let temporaryPrefix = PrivateFile.temporaryPrefix

    static func fileName(for key: String) -> String {
        SHA256.hex(of: key.utf8) + fileSuffix
    }
}
