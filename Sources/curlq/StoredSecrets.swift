import CurlQueue
import CurlQueueDownloads
import Foundation

/// What of a download may not go into a job store: a store is a file (or a database) other
/// people and backups read, so it holds no credential in the clear. The daemon resolves
/// credentials itself (`-u`, `--netrc`, `-b`); the store keeps at most a reference.
enum StoredSecrets {
    /// Why `url` with `fields` cannot be stored as it is, or nil when it can: a user or
    /// password in the URL, a header field with a secret name, or (unless allowed) a query or
    /// fragment parameter with one (``SecretRedactor/standard``'s rules, as every output's).
    static func problem(url: URL, fields: [HeaderField], allowSecretQuery: Bool) -> String? {
        let redactor = SecretRedactor.standard
        if url.user != nil || url.password != nil {
            return "\(Format.url(url)): the URL holds a user name or password, which the store would keep in the clear; "
                + "give them to the daemon instead (curlq daemon -u USER:PASSWORD, or --netrc)"
        }
        if let field = fields.first(where: { redactor.isSecret($0.name) }) {
            return "the header \(field.name) is secret and the store would keep it in the clear; "
                + "give credentials to the daemon instead (curlq daemon -u, --netrc, -b, or its own -H)"
        }
        guard !allowSecretQuery, let components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return nil }
        let names = (components.queryItems ?? []).map(\.name)
            + (components.fragment.map { URLComponents(string: "?" + $0)?.queryItems?.map(\.name) ?? [] } ?? [])
        if let name = names.first(where: redactor.isSecret) {
            return "\(Format.url(url)): the query parameter \(quoted(name)) looks secret and the store would keep it in the clear; "
                + "a signed URL may be stored anyway with --allow-secret-query (every output hides it)"
        }
        return nil
    }

    /// `url` as a store may keep it when it is only a record (`get --session`): no userinfo,
    /// secret query values hidden.
    static func redacted(_ url: URL) -> String {
        SecretRedactor.standard.redact(url)
    }
}
