import CurlQueueDownloads
import Foundation

extension TransferOptions {
    /// `-u`, `--netrc`, `--netrc-file` and `-b`, read and checked before the first request: a
    /// file that cannot be read or parsed is a usage error naming it (its contents are never
    /// quoted, they may be secrets).
    func credentials(_ environment: [String: String]) throws -> Credentials {
        var credentials = Credentials()
        if let user, case .success(let parsed) = Credentials.parseUser(user) { credentials.user = parsed }
        var netrcPath = netrcFile
        if netrcPath == nil, netrc {
            let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
            let path = home + "/.netrc"
            if FileKind.of(path) != .missing { netrcPath = path }  // curl too: no ~/.netrc, no credentials
        }
        if let netrcPath {
            let text = try Self.readText(netrcPath, what: "netrc file")
            switch Netrc.parse(text) {
            case .success(let parsed): credentials.netrc = parsed
            case .failure(let problem): throw UsageError("the netrc file \(quoted(netrcPath)): \(problem.message)")
            }
        }
        if let cookie {
            if cookie.contains("=") {
                if cookie.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                    throw UsageError("-b: the cookies hold a control character")
                }
                credentials.cookieText = cookie
            } else {
                switch Cookie.parseFile(try Self.readText(cookie, what: "cookie file")) {
                case .success(let cookies): credentials.cookies = cookies
                case .failure(let problem): throw UsageError("the cookie file \(quoted(cookie)): \(problem.message)")
                }
            }
        }
        return credentials
    }

    static func readText(_ path: String, what: String) throws -> String {
        switch GetCommand.readAll(path) {
        case .success(let data): return String(decoding: data, as: UTF8.self)
        case .failure(let error): throw UsageError("cannot read the \(what) \(quoted(path)): \(error.reason)")
        }
    }
}
