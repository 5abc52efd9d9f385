import CurlQueue
import Foundation
import HTTPTypes

/// Whose responses a ``ResponseCache`` holds, which decides what it may store (RFC 9111 §3).
///
/// Whatever the scope, every entry belongs to the credentials of the request that got it:
/// two requests share an entry only if they carry the same `Authorization`,
/// `Proxy-Authorization`, `Cookie`, user and password in the URL, and caller-declared
/// credential fields (``ResponseCache/init(store:scope:credentialFields:now:)``), so a
/// response is never given to another user, nor to an anonymous request, and a token that
/// changes (a logout, a login, a refreshed OAuth2 token) finds nothing stored.
public enum CacheScope: Hashable, Sendable {
    /// One user's cache, as a browser's (the default): responses marked `private` and
    /// responses to requests with `Authorization` are stored, each for its own credentials.
    case `private`
    /// A cache whose store serves several users (a server process making calls for many
    /// accounts, a store in a folder other users' processes open): it follows RFC 9111's
    /// rules for shared caches. A response marked `private` is never stored; a response to a
    /// request with `Authorization` (or a user and password in its URL) is stored only if it
    /// says `public`, `s-maxage` or `must-revalidate` (§3.5), and still only for those
    /// credentials; `s-maxage` replaces `max-age`. A cache TTL does not lift these rules.
    case shared
}

/// The partition of the cache that a request's credentials select: a keyed hash, so that the
/// secrets are never kept in a store, not in a key, a file name or a file.
struct CachePartition {
    /// The fields that always carry credentials.
    static let standardCredentialFields: [HTTPField.Name] = [.authorization, .proxyAuthorization, .cookie]

    /// The names of the fields whose values select the partition: the standard ones and the
    /// caller's, without repeats, in a fixed order.
    let credentialFields: [HTTPField.Name]
    let secret: [UInt8]

    init(declaredFields: [HTTPField.Name], secret: [UInt8]) {
        var names: [HTTPField.Name] = []
        for name in Self.standardCredentialFields + declaredFields where !names.contains(name) { names.append(name) }
        credentialFields = names.sorted { $0.canonicalName < $1.canonicalName }
        self.secret = secret
    }

    /// The URL without its fragment, user and password (those are credentials: they go into
    /// the partition, never into a key in clear).
    static func keyURL(_ url: URL) -> String {
        var text = url.absoluteString
        if url.user != nil || url.password != nil, var components = URLComponents(url: url, resolvingAgainstBaseURL: false) {
            components.user = nil
            components.password = nil
            text = components.string ?? text
        }
        if let hash = text.firstIndex(of: "#") { text = String(text[..<hash]) }
        return text
    }

    /// The keyed hash (HMAC-SHA-256 with the store's secret) of the credentials `request`
    /// carries, or `nil` for a request that carries none.
    func tag(url: URL, fields: HTTPFields) -> String? {
        var message: [UInt8] = []
        var any = false
        // Each part is length-prefixed, so no two sets of credentials give the same message.
        func append(_ text: String) {
            let bytes = Array(text.utf8)
            withUnsafeBytes(of: UInt64(bytes.count).bigEndian) { message.append(contentsOf: $0) }
            message.append(contentsOf: bytes)
        }
        for name in credentialFields {
            let values = fields[values: name]
            guard !values.isEmpty else { continue }
            any = true
            append(name.canonicalName)
            append(String(values.count))
            for value in values { append(value) }
        }
        if url.user != nil || url.password != nil {
            any = true
            append(":userinfo")
            append(url.user ?? "")
            append(url.password ?? "")
        }
        return any ? SHA256.hmacHex(key: secret, message: message) : nil
    }

    /// Whether the request carries `Authorization` in RFC 9111 §3.5's sense: the field, or a
    /// user and password in the URL, which libcurl sends as one.
    static func hasAuthorization(url: URL, fields: HTTPFields) -> Bool {
        fields[.authorization] != nil || url.user != nil || url.password != nil
    }

    /// 32 random bytes from the system's generator.
    static func randomSecret() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    /// The secret of stores that keep none of their own: random, one per process.
    static let processSecret = randomSecret()
}
