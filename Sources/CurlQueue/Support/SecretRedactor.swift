public import Foundation
public import HTTPTypes

/// Hides what is likely secret in URLs and header fields before they are shown: in log entries
/// (``LoggingMiddleware``, the library's own warnings), error descriptions and `curlq`'s
/// standard error. Every place the library shows a URL goes through one.
///
/// What it hides:
/// - **Header fields and query parameters with a secret name**: a field's value is shown as
///   `<redacted>`, a query value as `REDACTED`. Name-value pairs in a fragment
///   (`#access_token=…`, as OAuth2's implicit flow returns) are treated as a query.
/// - **All of the URL's userinfo**, user and password: `https://TOKEN@host/` and
///   `https://user:pass@host/` show as `https://REDACTED@host/` and
///   `https://REDACTED:REDACTED@host/`. The user is often the secret itself (a token).
///
/// Which names are secret (compared without case):
/// 1. A name in ``keptNames`` is not.
/// 2. A name in ``names`` is (whole names: `sig`, `code`, `pwd` by default).
/// 3. Otherwise the name is split into words, at every character that is not a letter or a
///    digit and where a lower-case letter is followed by a capital (`X-Api-Key` → x, api, key;
///    `accessToken` → access, token). It is secret when one of its words **ends with** one of
///    ``words``, plural `s` allowed: `key` matches `X-Api-Key`, `apikey`, `apiKey`, `keys`;
///    `token` matches `X-Auth-Token`, `private_token`, `csrftoken`.
///
/// The rule is deliberately wide: a value hidden by mistake costs a log line some detail; a
/// secret shown by mistake is leaked. A word that only *starts* with a secret word is kept, so
/// `keyboard`, `keyword`, `author` and `tokenizer` are shown, and so are `Accept-Language`
/// and `page`; a word that ends with one is hidden even when benign (`monkey`, `hockey`):
/// add such names to ``keptNames`` with ``keeping(_:)``.
public struct SecretRedactor: Sendable, Hashable {
    /// The secret words by default: `key`, `token`, `secret`, `auth`, `authorization`,
    /// `session`, `sessionid`, `sessid`, `password`, `passwd`, `signature`, `credential`,
    /// `cookie`.
    public static let defaultWords: Set<String> = [
        "key", "token", "secret", "auth", "authorization", "session", "sessionid", "sessid",
        "password", "passwd", "signature", "credential", "cookie",
    ]

    /// The whole names secret by default: `sig`, `code` (OAuth2's authorization code), `pwd`.
    public static let defaultNames: Set<String> = ["sig", "code", "pwd"]

    /// The default redactor: ``defaultWords`` and ``defaultNames``, nothing kept.
    public static let standard = SecretRedactor()

    /// Words that make a name secret when one of its words ends with them (lower case).
    public private(set) var words: Set<String>
    /// Names secret as a whole (lower case).
    public private(set) var names: Set<String>
    /// Names never hidden, whatever the words say (lower case).
    public private(set) var keptNames: Set<String>

    /// A redactor with these words and names (compared without case).
    public init(words: Set<String> = SecretRedactor.defaultWords, names: Set<String> = SecretRedactor.defaultNames,
                keptNames: Set<String> = []) {
        self.words = Set(words.map { $0.lowercased() }.filter { !$0.isEmpty })
        self.names = Set(names.map { $0.lowercased() })
        self.keptNames = Set(keptNames.map { $0.lowercased() })
    }

    /// This redactor, also hiding the values of the fields and query parameters called `names`.
    public func redacting(_ names: some Sequence<String>) -> SecretRedactor {
        var copy = self
        for name in names.map({ $0.lowercased() }) {
            copy.names.insert(name)
            copy.keptNames.remove(name)
        }
        return copy
    }

    /// This redactor, showing the values of the fields and query parameters called `names`
    /// even when a secret word matches them.
    public func keeping(_ names: some Sequence<String>) -> SecretRedactor {
        var copy = self
        for name in names.map({ $0.lowercased() }) {
            copy.keptNames.insert(name)
            copy.names.remove(name)
        }
        return copy
    }

    /// Whether values named `name` (a field's or a query parameter's) are hidden.
    public func isSecret(_ name: String) -> Bool {
        let lower = name.lowercased()
        if keptNames.contains(lower) { return false }
        if names.contains(lower) { return true }
        return Self.words(of: name).contains { word in
            let singular = word.count > 1 && word.hasSuffix("s") ? String(word.dropLast()) : nil
            return words.contains { secret in
                word.hasSuffix(secret) || (singular?.hasSuffix(secret) ?? false)
            }
        }
    }

    /// `url` as it may be shown: userinfo, and the values of secret query (and fragment)
    /// parameters, replaced by `REDACTED`.
    public func redact(_ url: URL) -> String {
        // Nothing to hide: shown exactly as given.
        if url.user == nil, url.password == nil, url.query == nil, url.fragment == nil { return url.absoluteString }
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return "<unparsable URL>" }
        if components.percentEncodedUser != nil { components.percentEncodedUser = "REDACTED" }
        if components.percentEncodedPassword != nil { components.percentEncodedPassword = "REDACTED" }
        if let query = components.percentEncodedQuery { components.percentEncodedQuery = redactPairs(query) }
        if let fragment = components.percentEncodedFragment, fragment.contains("=") {
            components.percentEncodedFragment = redactPairs(fragment)
        }
        return components.string ?? "<unparsable URL>"
    }

    /// `fields` as they may be shown, one `Name: value` each, secret values as `<redacted>`.
    public func redact(_ fields: HTTPFields) -> [String] {
        fields.map { field in "\(field.name.rawName): \(isSecret(field.name.rawName) ? "<redacted>" : field.value)" }
    }

    /// `name=value&…` with the values of secret names replaced.
    private func redactPairs(_ pairs: String) -> String {
        pairs.split(separator: "&", omittingEmptySubsequences: false).map { pair in
            guard let equals = pair.firstIndex(of: "=") else { return String(pair) }
            let rawName = pair[..<equals]
            let name = (rawName.removingPercentEncoding ?? String(rawName)).replacingOccurrences(of: "+", with: " ")
            return isSecret(name) ? "\(rawName)=REDACTED" : String(pair)
        }.joined(separator: "&")
    }

    /// `name` in lower-case words: split at non-alphanumerics and at lower-to-upper changes.
    static func words(of name: String) -> [String] {
        var words: [String] = []
        var current = ""
        var previousWasLower = false
        for character in name {
            guard character.isLetter || character.isNumber else {
                if !current.isEmpty { words.append(current) }
                current = ""
                previousWasLower = false
                continue
            }
            if character.isUppercase, previousWasLower, !current.isEmpty {
                words.append(current)
                current = ""
            }
            current += character.lowercased()
            previousWasLower = character.isLowercase
        }
        if !current.isEmpty { words.append(current) }
        return words
    }
}
