import CCurl  // <sys/xattr.h>: the source mark a .part keeps
import CurlQueue
import CurlQueueDownloads
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One file with mirrors (an input line of TAB-separated URLs), as ``BatchRunner`` goes through
/// them: one try at a time, each a `RequestOperation` of one attempt to one mirror, the next
/// mirror after a failure that another server could fix, round the list within the retry budget.
///
/// The engine's own retries cannot do this: an operation retries its one URL. So curlq counts
/// the tries, waits between rounds and says why, as the engine would for one URL.
struct MirrorState {
    /// The file's URL, then its mirrors.
    let urls: [URL]
    /// Tries in all, the first included: `--retries` + 1, and at least one per mirror.
    let maxTries: Int
    /// The mirror being tried, or to be tried next.
    var current = 0
    /// Tries started, the first included.
    var tries = 0
    /// The mirror whose bytes the `.part` holds; nil when there is no `.part`, or nothing says
    /// where it came from.
    var partFrom: Int?
    /// The mirror that served the complete file.
    var served: Int?
    /// Every failed try, in order.
    var failures: [MirrorFailure] = []
    /// Mirrors not tried again: a host name that does not resolve (without `--retry-dns`).
    var dropped: Set<Int> = []
    /// Times the list was gone round (for the backoff between rounds).
    var rounds = 0
    /// The size of the `.part` the current try resumes (0 when it starts over): a try that
    /// leaves it so wrote nothing to it.
    var partSizeBefore: Int64 = 0

    init(job: Job, maxAttempts: Int, partFrom: Int?) {
        urls = [job.url] + job.mirrors
        maxTries = max(maxAttempts, urls.count)
        self.partFrom = partFrom
    }

    /// The next mirror to try after `current`, in list order and round again; `wrapped` when it
    /// starts a new round. Nil when every mirror is dropped.
    func next() -> (index: Int, wrapped: Bool)? {
        for step in 1...urls.count {
            let candidate = (current + step) % urls.count
            if !dropped.contains(candidate) { return (candidate, candidate <= current) }
        }
        return nil
    }

    /// `mirror 2 of 3 (https://b.example.net/x.iso)`, secrets redacted.
    func name(_ index: Int) -> String {
        "mirror \(index + 1) of \(urls.count) (\(Format.url(urls[index])))"
    }

    /// The wait before a new round: as the engine's backoff (0.25 s doubling up to 30 s, half
    /// of it random). Within a round, the next mirror is another server: no wait.
    func roundBackoff() -> Double {
        let base = min(0.25 * pow(2, Double(max(0, rounds - 1))), 30)
        return base / 2 + base / 2 * Double.random(in: 0..<1)
    }

    /// The failure of the whole file: every mirror named with why its last try failed.
    func summary() -> String {
        var last: [Int: String] = [:]
        for failure in failures { last[failure.mirror] = failure.reason }
        let each = urls.indices.map { index in
            "\(Format.url(urls[index])): \(last[index] ?? "not tried")"
        }
        return "no mirror could serve it (\(tries) \(tries == 1 ? "try" : "tries")): " + each.joined(separator: "; ")
    }

    var report: MirrorReport {
        MirrorReport(served: served.map { urls[$0] }, servedIndex: served, count: urls.count, failures: failures)
    }
}

/// One failed try of a file with mirrors.
struct MirrorFailure: Sendable {
    /// Which mirror (0 for the file's own URL).
    var mirror: Int
    var url: URL
    var reason: String
    var kind: FileResult.ErrorKind
    var status: Int?
}

/// Which mirror served a file and which failed, for the done line and `--json`'s `mirrors`.
struct MirrorReport: Sendable {
    var served: URL?
    var servedIndex: Int?
    var count: Int
    var failures: [MirrorFailure]
}

/// What makes curlq go to the next mirror, and what makes resuming a `.part` on another one safe.
enum MirrorRules {
    /// An HTTP status another mirror could fix: a server error (5xx), a file missing there (404,
    /// 410), a server too busy or slow (408, 429), or one of `--retry-http`. Any other status
    /// (400, 401, 403, 416…) says the request itself is wrong, which every mirror would refuse.
    static func otherMirrorMayFix(status: Int, retryHTTP: Set<Int>) -> Bool {
        status >= 500 || [404, 408, 410, 429].contains(status) || retryHTTP.contains(status)
    }

    /// A network error (refused, reset, stalled, a name that does not resolve, TLS) is the
    /// server's or the path to it: another mirror may work. A local file problem, a request
    /// that cannot be sent, or a cancel is the same on every mirror.
    static func otherMirrorMayFix(_ error: RequestError) -> Bool {
        switch error {
        case .cancelled, .invalidRequest, .fileSystem: return false
        case .timedOut(let failure), .transport(let failure): return failure.code != .writeError
        }
    }

    /// The extended attribute in which curlq keeps, on a `.part`, the URL whose bytes it holds
    /// (beside the engine's validator), so that a rerun knows which mirror wrote it.
    static let sourceAttribute = PartFileAttribute.source

    /// Notes that `path` (a `.part`) holds bytes from `url`. Where the file system keeps no
    /// extended attributes, a rerun does not know: it treats the `.part` as the first URL's,
    /// which is safe because such a `.part` has no validator either (the engine keeps it the
    /// same way), so only `-c` resumes it.
    static func markSource(_ path: String, _ url: URL) {
        _ = url.absoluteString.withCString { lsetxattr(path, sourceAttribute, $0, strlen($0), 0) }
    }

    /// The URL the `.part` at `path` says it holds bytes from, if any.
    static func source(of path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 70 * 1024)
        let count = lgetxattr(path, sourceAttribute, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Which of `urls` wrote the `.part` at `path`: its mark, else (a `.part` from a run
    /// without mirrors, or a file system without extended attributes) the first URL. Nil when
    /// the mark names none of them (the line's URLs changed since).
    static func partSource(_ path: String, urls: [URL]) -> Int? {
        guard let mark = source(of: path) else { return 0 }
        return urls.firstIndex { $0.absoluteString == mark }
    }

    /// Removes the engine's validator from a `.part` whose rest is to come from another mirror:
    /// its `If-Range` would mean nothing to that server (a strong ETag is one server's name
    /// for one version; two servers' `Last-Modified` may agree for different bytes). The
    /// checksum decides instead.
    static func dropValidator(_ path: String) {
        _ = lremovexattr(path, PartFileAttribute.validator)
    }

    /// `-H`, `header=`, `-u`, netrc and cookies for a try on `url`: the fields that prove who
    /// the user is (`Authorization`, `Cookie`, `Proxy-Authorization`, given with `-H`,
    /// `header=` or `-u`) go only to the origin of the file's first URL, for which they were
    /// given; netrc and cookie-file credentials are chosen for `url`'s own host, as for any URL.
    /// A mirror's own userinfo (`https://user:pw@b/…`) is its own.
    static func isForeign(_ url: URL, first: URL) -> Bool {
        Admission.origin(of: url) != Admission.origin(of: first)
    }

    static let secretFields: Set<String> = ["authorization", "cookie", "proxy-authorization"]
}
