import CurlQueueDownloads
import Foundation

/// `-u user:password`, `--netrc`/`--netrc-file` and `-b/--cookie`: what curlq sends to prove
/// who it is, decided per URL before the first request and sent as ordinary header fields
/// (`Authorization: Basic …`, `Cookie: …`).
///
/// Why header fields rather than libcurl's CURLOPT_USERPWD/CURLOPT_NETRC/CURLOPT_COOKIEFILE:
/// neither field is in `Request.fieldsSentToAnyOrigin`, so the core's redirect policy stops
/// both at the first hop to another origin (scheme, host, port), for every way they were
/// given. libcurl's own netrc lookup runs again on each redirect hop, and libcurl 7.88 (the
/// one this runs on) is open to CVE-2024-11053, which sent the first host's netrc password to
/// the host a redirect named. It also needs no new per-request option in the core.
///
/// The price, said in docs/curlq.md: a cookie a server sets during a redirect chain is not
/// kept (curlq is a downloader, not a browser), and a redirect to another host that a netrc
/// file or cookie file has credentials for gets none (stricter than curl, never looser).
struct Credentials: Sendable, Equatable {
    /// `-u user:password`, sent to every URL (as curl does).
    var user: (name: String, password: String)? {
        get { basicUser.map { ($0.name, $0.password) } }
        set { basicUser = newValue.map { BasicUser(name: $0.name, password: $0.password) } }
    }
    private var basicUser: BasicUser?
    /// The machines of a netrc file, in file order (the first match wins), with its default.
    var netrc: Netrc?
    /// Cookies from a Netscape cookie file.
    var cookies: [Cookie] = []
    /// `-b 'name=value; …'`: sent as given to every URL.
    var cookieText: String?

    private struct BasicUser: Sendable, Equatable {
        var name: String
        var password: String
    }

    /// Whether any credential was given: without them, nothing is added to any request.
    var isEmpty: Bool { basicUser == nil && netrc == nil && cookies.isEmpty && cookieText == nil }

    /// The fields for `url`, leaving out a field of a name `existing` already has (an
    /// explicit `-H`/`header=` wins). `now` decides which cookies have expired.
    func fields(for url: URL, besides existing: [HeaderField], now: Date = Date()) -> [HeaderField] {
        guard !isEmpty else { return [] }
        let names = Set(existing.map { $0.name.lowercased() })
        var fields: [HeaderField] = []
        if !names.contains("authorization"), let (name, password) = login(for: url) {
            let token = Data("\(name):\(password)".utf8).base64EncodedString()
            fields.append(HeaderField(name: "Authorization", value: "Basic " + token))
        }
        if !names.contains("cookie") {
            var pairs = cookieText.map { [$0] } ?? []
            pairs += cookies.filter { $0.matches(url, now: now) }.map { "\($0.name)=\($0.value)" }
            if !pairs.isEmpty { fields.append(HeaderField(name: "Cookie", value: pairs.joined(separator: "; "))) }
        }
        return fields
    }

    /// `-u` first (as curl: it overrides the netrc file), else the netrc file's machine for the
    /// URL's host, else its `default`.
    func login(for url: URL) -> (String, String)? {
        if let basicUser { return (basicUser.name, basicUser.password) }
        guard let netrc, let host = url.host else { return nil }
        return netrc.login(for: host)
    }

    /// `-u` as given: `user:password` (split at the first colon, as curl does). A user
    /// alone is refused rather than prompted for: curlq runs unattended, and its standard
    /// input may be the list of URLs (`-i -`).
    static func parseUser(_ text: String) -> Result<(name: String, password: String), InputProblem> {
        guard let colon = text.firstIndex(of: ":") else {
            return .failure(InputProblem("-u takes user:password; curlq does not prompt for a password (use --netrc-file to keep it off the command line)"))
        }
        let name = String(text[..<colon])
        let password = String(text[text.index(after: colon)...])
        if (name + password).unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            return .failure(InputProblem("-u: the user or password holds a control character"))
        }
        return .success((name, password))
    }
}

/// A netrc file (curl's and ftp's format): `machine HOST login USER password PASS` and
/// `default login … password …`, in any layout of white space, `#` comments to the end of a
/// line, values in double quotes (with `\"` and `\\`) allowed, `macdef NAME` bodies (to the
/// next blank line) and `account` skipped.
struct Netrc: Sendable, Equatable {
    struct Machine: Sendable, Equatable {
        /// The host, lowercased; nil for `default`.
        var host: String?
        var login: String?
        var password: String?
    }

    var machines: [Machine] = []

    /// The first machine named `host` (without case), else `default`; nil when it has no
    /// password (a login alone is not a credential curlq sends).
    func login(for host: String) -> (String, String)? {
        let lower = host.lowercased()
        let machine = machines.first { $0.host == lower } ?? machines.first { $0.host == nil }
        guard let machine, let password = machine.password else { return nil }
        return (machine.login ?? "", password)
    }

    /// Parses the text of a netrc file. A keyword without its value is an error naming it.
    static func parse(_ text: String) -> Result<Netrc, InputProblem> {
        var netrc = Netrc()
        var tokens = Tokenizer(text)
        var current: Machine?
        func close() { if let current { netrc.machines.append(current) } }
        while let token = tokens.next() {
            switch token {
            case "machine":
                guard let host = tokens.next() else { return .failure(InputProblem("'machine' without a host name")) }
                close()
                current = Machine(host: host.lowercased())
            case "default":
                close()
                current = Machine(host: nil)
            case "login", "password", "account":
                guard let value = tokens.next() else { return .failure(InputProblem("'\(token)' without a value")) }
                guard current != nil else { return .failure(InputProblem("'\(token)' before any 'machine' or 'default'")) }
                if token == "login" { current?.login = value }
                if token == "password" { current?.password = value }
            case "macdef":
                tokens.skipMacro()
            default:
                return .failure(InputProblem("unexpected \(quoted(token)) (a netrc file holds machine, default, login, password, account and macdef)"))
            }
        }
        close()
        return .success(netrc)
    }

    /// Splits a netrc file into tokens: white space separates them, `#` starts a comment.
    struct Tokenizer {
        private let scalars: [Unicode.Scalar]
        private var position = 0

        init(_ text: String) { scalars = Array(text.unicodeScalars) }

        mutating func next() -> String? {
            while position < scalars.count {
                let scalar = scalars[position]
                if scalar == "#" {
                    while position < scalars.count, scalars[position] != "\n" { position += 1 }
                } else if scalar.properties.isWhitespace {
                    position += 1
                } else {
                    break
                }
            }
            guard position < scalars.count else { return nil }
            var token = String.UnicodeScalarView()
            if scalars[position] == "\"" {
                position += 1
                while position < scalars.count, scalars[position] != "\"" {
                    if scalars[position] == "\\", position + 1 < scalars.count { position += 1 }
                    token.append(scalars[position])
                    position += 1
                }
                position += 1  // the closing quote
            } else {
                while position < scalars.count, !scalars[position].properties.isWhitespace {
                    token.append(scalars[position])
                    position += 1
                }
            }
            return String(token)
        }

        /// Skips a `macdef` name and body: everything to the next empty line.
        mutating func skipMacro() {
            while position < scalars.count {
                if scalars[position] == "\n", position + 1 < scalars.count, scalars[position + 1] == "\n" {
                    position += 2
                    return
                }
                position += 1
            }
        }
    }
}

/// One line of a Netscape cookie file (curl's `-c`, wget's `--save-cookies`, browsers'
/// exports): `domain TAB include-subdomains TAB path TAB secure TAB expires TAB name TAB value`.
struct Cookie: Sendable, Equatable {
    /// Lowercased, without a leading dot.
    var domain: String
    var includesSubdomains: Bool
    var path: String
    var secure: Bool
    /// Seconds since 1970; 0 for a session cookie (sent until the run ends).
    var expires: Int64
    var name: String
    var value: String

    /// Whether the cookie goes with a request for `url`: its host is the domain (or, with
    /// include-subdomains, below it), its path starts with the cookie's path, it is https
    /// when the cookie is secure, and the cookie has not expired.
    func matches(_ url: URL, now: Date) -> Bool {
        guard let host = url.host?.lowercased() else { return false }
        let domainMatches = host == domain || (includesSubdomains && host.hasSuffix("." + domain))
        guard domainMatches else { return false }
        if secure, url.scheme?.lowercased() != "https" { return false }
        if expires != 0, Double(expires) <= now.timeIntervalSince1970 { return false }
        let requestPath = url.path.isEmpty ? "/" : url.path
        guard requestPath.hasPrefix(path) else { return false }
        return path.hasSuffix("/") || requestPath.count == path.count
            || requestPath[requestPath.index(requestPath.startIndex, offsetBy: path.count)] == "/"
    }

    /// Parses a cookie file: blank lines and `#` comments skipped, except `#HttpOnly_` lines,
    /// which are cookies. A line with other than seven TAB-separated fields is an error naming
    /// its number. Values are checked for what cannot go in a header field.
    static func parseFile(_ text: String) -> Result<[Cookie], InputProblem> {
        var cookies: [Cookie] = []
        for (number, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            var line = Substring(rawLine.hasSuffix("\r") ? rawLine.dropLast() : rawLine)
            if line.hasPrefix("#HttpOnly_") {
                line = line.dropFirst("#HttpOnly_".count)
            } else if line.hasPrefix("#") || line.allSatisfy({ $0 == " " || $0 == "\t" }) {
                continue
            }
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 7 else {
                return .failure(InputProblem("line \(number + 1): a cookie line has 7 TAB-separated fields, not \(fields.count)"))
            }
            guard let expires = Int64(fields[4]) else {
                return .failure(InputProblem("line \(number + 1): the expiry \(quoted(fields[4])) is not a number"))
            }
            let text = fields[5] + fields[6]
            if text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F || $0 == ";" }) {
                return .failure(InputProblem("line \(number + 1): the cookie's name or value holds ';' or a control character"))
            }
            var domain = fields[0].lowercased()
            if domain.hasPrefix(".") { domain.removeFirst() }
            cookies.append(Cookie(
                domain: domain, includesSubdomains: fields[1].uppercased() == "TRUE", path: fields[2].isEmpty ? "/" : fields[2],
                secure: fields[3].uppercased() == "TRUE", expires: expires, name: fields[5], value: fields[6]))
        }
        return .success(cookies)
    }
}
