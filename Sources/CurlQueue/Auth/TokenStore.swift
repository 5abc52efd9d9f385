public import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Where an authenticator keeps its token between runs. Tokens always live in memory too; a
/// store only makes them outlast the process.
///
/// Implementations must be safe to call from any thread.
public protocol TokenStore: Sendable {
    /// The stored token, or `nil`.
    func loadToken() -> String?
    /// Stores `token`, replacing the old one.
    func saveToken(_ token: String)
    /// Forgets the stored token.
    func removeToken()
}

/// A token store in one file, readable and writable by its owner only (0600).
///
/// The token is written to a temporary file beside it, created 0600, and renamed over the old
/// one: a crash leaves the old token or the new one, and at no moment can another user read
/// it. A file that is not a regular file (a symbolic link, say) is never read or followed.
public struct FileTokenStore: TokenStore {
    /// The file the token is kept in.
    public let file: URL

    /// A store in `file`. Its folder must exist.
    public init(file: URL) {
        self.file = file
    }

    public func loadToken() -> String? {
        let descriptor = open(file.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size <= 1 << 20 else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var filled = 0
        while filled < bytes.count {
            let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + filled, $0.count - filled) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return nil }
            filled += count
        }
        let token = String(decoding: bytes, as: UTF8.self)
        return token.isEmpty ? nil : token
    }

    public func saveToken(_ token: String) {
        let temporary = file.deletingLastPathComponent()
            .appendingPathComponent(".\(file.lastPathComponent).\(UUID().uuidString).tmp").path
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else { return }
        let bytes = Array(token.utf8)
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress! + written, $0.count - written) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            written += count
        }
        let complete = written == bytes.count && fsync(descriptor) == 0
        close(descriptor)
        if !complete || rename(temporary, file.path) != 0 { unlink(temporary) }
    }

    public func removeToken() {
        unlink(file.path)
    }
}
