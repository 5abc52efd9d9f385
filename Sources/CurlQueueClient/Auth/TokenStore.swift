import CurlQueue
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
        guard let data = PrivateFile.contents(at: file.path, maxSize: 1 << 20), !data.isEmpty else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    public func saveToken(_ token: String) {
        PrivateFile.replace(at: file.path, with: Data(token.utf8), durable: true)
    }

    public func removeToken() {
        unlink(file.path)
    }
}
