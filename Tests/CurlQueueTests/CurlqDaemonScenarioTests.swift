@testable import curlq
import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// `curlq daemon` ends each job as `curlq get` ends its file: the same scenarios (an error
/// status, a 503 that never ends, a checksum mismatch, an untrusted certificate, a file already
/// there, credentials past a redirect to another origin, a stall) run through both, and the
/// outcome, the reason's words and the error kind are compared.
@Suite struct CurlqDaemonScenarioTests {
    struct Outcome: Equatable, CustomStringConvertible {
        /// downloaded, skipped or failed (get's words; the daemon's done / already there mapped to them).
        var outcome: String
        /// The reason up to its first ';' (what follows is the advice, which names each command's options).
        var reason: String?
        var errorKind: String?
        var description: String { "\(outcome) \(errorKind ?? "-") \(reason ?? "-")" }
    }

    static let password = "d43m0n-SECRET"

    @Test func theDaemonEndsEachScenarioAsGetDoes() async throws {
        let nginx = try await NginxServer.start()
        defer { nginx.shutdown() }
        try await withServer { server in
            try await withServer { other in
                try await withFolder { folder in
                    let wrong = String(repeating: "ab", count: 32)
                    let target = other.url("/bytes/20").absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                    let cases: [(name: String, url: String, extra: String)] = [
                        ("gone", server.url("/status/404").absoluteString, ""),
                        ("busy", server.url("/status/503").absoluteString, ""),
                        ("mismatch", server.url("/bytes/100").absoluteString, "    sha256=\(wrong)\n"),
                        ("untrusted", nginx.url("/files/1k").absoluteString, ""),
                        ("short", server.url("/bytes/100?n=1").absoluteString, ""),
                        ("whole", server.url("/bytes/100?n=2").absoluteString, ""),
                        ("hop", server.url("/redirect?to=\(target)").absoluteString, ""),
                        ("stall", server.url("/bytes/100000?stallAfter=1000").absoluteString, ""),
                    ]
                    let input = cases.map { "\($0.url)\n    out=\($0.name)\n\($0.extra)" }.joined()
                    let inputFile = folder.appendingPathComponent("urls.txt")
                    try Data(input.utf8).write(to: inputFile)
                    let byGet = folder.appendingPathComponent("get"), byDaemon = folder.appendingPathComponent("daemon")
                    for place in [byGet, byDaemon] {
                        try FileManager.default.createDirectory(at: place, withIntermediateDirectories: true)
                        try Data(repeating: 7, count: 10).write(to: place.appendingPathComponent("short"))  // not the server's 100
                        try Data(FixtureServer.expectedBytes(count: 100)).write(to: place.appendingPathComponent("whole"))
                    }
                    let unset = ["CURL_CA_BUNDLE": "", "SSL_CERT_FILE": "", "SSL_CERT_DIR": ""]
                    let options = ["--stall-timeout", "2", "-u", "alice:\(Self.password)"]

                    let get = try await curlq(["get", "--json", "--retries", "1", "-d", byGet.path, "-i", inputFile.path] + options,
                                              environment: unset)
                    #expect(get.status == 1, "\(get)")
                    var expected: [String: Outcome] = [:]
                    for file in try get.jsonFiles() {
                        let index = try #require(cases.firstIndex { $0.url == file["url"] as? String })
                        expected[cases[index].name] = Outcome(
                            outcome: file["outcome"] as? String ?? "?",
                            reason: (file["reason"] as? String).map(Self.beforeAdvice),
                            errorKind: file["errorKind"] as? String)
                    }

                    let store = "sqlite:" + folder.appendingPathComponent("jobs.db").path
                    let enqueued = try await curlq(["enqueue", "--store", store, "--retries", "1", "-i", inputFile.path])
                    #expect(enqueued.status == 0, "\(enqueued)")
                    let daemon = try await curlq(["daemon", "--store", store, "-d", byDaemon.path, "--exit-when-done", "--drain-timeout", "0"] + options,
                                                 environment: unset)
                    #expect(daemon.status == 0, "\(daemon)")
                    let status = try await curlq(["status", "--store", store, "--json"])
                    let jobs = try #require(try status.json()["jobs"] as? [[String: Any]])
                    var actual: [String: Outcome] = [:]
                    for job in jobs {
                        let name = try #require(job["file"] as? String)
                        let state = job["state"] as? String
                        let outcome = state == "done" ? (job["alreadyThere"] as? Bool == true ? "skipped" : "downloaded") : state ?? "?"
                        actual[name] = Outcome(
                            outcome: outcome,
                            reason: outcome == "skipped" ? "already there" : (job["error"] as? String).map(Self.beforeAdvice),
                            errorKind: job["errorKind"] as? String)
                    }
                    for scenario in cases {
                        #expect(actual[scenario.name] == expected[scenario.name], "\(scenario.name): daemon \(actual[scenario.name].map(String.init(describing:)) ?? "none"), get \(expected[scenario.name].map(String.init(describing:)) ?? "none")")
                    }
                    // The outcomes themselves, so that two equally wrong commands do not pass.
                    #expect(actual["gone"] == Outcome(outcome: "failed", reason: "HTTP 404 Not Found", errorKind: "http"))
                    #expect(actual["busy"] == Outcome(outcome: "failed", reason: "HTTP 503 Service Unavailable", errorKind: "http"))
                    let busy = try #require(jobs.first { $0["file"] as? String == "busy" })
                    #expect(busy["attempt"] as? Int == 2 && (busy["error"] as? String)?.hasSuffix("(after 2 attempts)") == true, "\(busy)")
                    #expect(actual["mismatch"]?.errorKind == "checksum" && actual["untrusted"]?.errorKind == "tls")
                    #expect(actual["short"]?.errorKind == "existing-file" && actual["whole"]?.outcome == "skipped")
                    #expect(actual["hop"]?.outcome == "downloaded" && actual["stall"]?.errorKind == "stall")
                    for (place, name) in [(byDaemon, "gone"), (byDaemon, "busy"), (byDaemon, "mismatch"), (byDaemon, "untrusted")] {
                        #expect(!FileManager.default.fileExists(atPath: place.appendingPathComponent(name).path), "\(name) stands under its name")
                    }
                    #expect(contents(byDaemon.appendingPathComponent("short")) == Array(repeating: 7, count: 10), "never replaced")
                    // An untrusted certificate is not tried again; the 503 is, once.
                    let untrusted = try #require(jobs.first { $0["file"] as? String == "untrusted" })
                    #expect(untrusted["attempt"] as? Int == 1)
                    // -u went to the first origin only, for get and the daemon alike; no output shows it.
                    let basic = "Basic " + Data("alice:\(Self.password)".utf8).base64EncodedString()
                    #expect(server.requests.filter { $0.uri.hasPrefix("/redirect") }.allSatisfy { $0.header("Authorization") == basic })
                    #expect(other.requests.count == 2 && other.requests.allSatisfy { $0.header("Authorization") == nil })
                    for text in [get.stdout, get.stderr, daemon.stdout, daemon.stderr, status.stdout] {
                        #expect(!text.contains(Self.password), "\(text)")
                    }
                    // The daemon's lines: a start, one per job, a stop.
                    #expect(daemon.stdout.contains("curlq daemon: running the jobs of"), "\(daemon)")
                    #expect(daemon.stdout.contains("failed: gone from ") && daemon.stdout.contains("HTTP 404 Not Found"), "\(daemon)")
                    #expect(daemon.stdout.contains("curlq daemon: stopped: 1 done, 1 already there, 6 failed"), "\(daemon)")
                    #expect(!daemon.stdout.contains("CURLE_"), "\(daemon)")
                }
            }
        }
    }

    /// A private CA given through curl's variable is trusted by the daemon as by get.
    @Test func theDaemonTrustsCurlsCABundleVariable() async throws {
        let nginx = try await NginxServer.start()
        defer { nginx.shutdown() }
        try await withFolder { folder in
            let store = "sqlite:" + folder.appendingPathComponent("jobs.db").path
            #expect(try await curlq(["enqueue", "--store", store, nginx.url("/files/1k").absoluteString]).status == 0)
            let daemon = try await curlq(["daemon", "--store", store, "-d", folder.path, "--exit-when-done"],
                                         environment: ["CURL_CA_BUNDLE": nginx.caFile, "SSL_CERT_FILE": "", "SSL_CERT_DIR": ""])
            #expect(daemon.status == 0 && daemon.stdout.contains("job 1 done: 1k, 1.00 KiB (HTTP 200)"), "\(daemon)")
            #expect(contents(folder.appendingPathComponent("1k")) == FixtureServer.expectedBytes(count: 1024))
        }
    }

    /// `--overwrite`, as get's: a file already there is downloaded again and replaced; without
    /// it the same job fails and the file stays.
    @Test func overwriteReplacesAFileAlreadyThere() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let store = "sqlite:" + folder.appendingPathComponent("jobs.db").path
                let file = folder.appendingPathComponent("f.bin")
                for (arguments, expected) in [([String](), Data("mine".utf8)), (["--overwrite"], Data(FixtureServer.expectedBytes(count: 300)))] {
                    try Data("mine".utf8).write(to: file)
                    let input = server.url("/bytes/300").absoluteString + "\n    out=f.bin\n"
                    #expect(try await curlq(["enqueue", "--store", store, "--duplicates", "allow", "-i", "-"], input: input).status == 0)
                    let daemon = try await curlq(["daemon", "--store", store, "-d", folder.path, "--exit-when-done"] + arguments)
                    #expect(daemon.status == 0, "\(daemon)")
                    #expect(try Data(contentsOf: file) == expected, "\(arguments)")
                }
                let status = try await curlq(["status", "--store", store])
                #expect(status.stdout.hasPrefix("waiting 0, delayed 0, running 0, done 1, failed 1, cancelled 0\n"), "\(status)")
            }
        }
    }

    /// A line of mirrors, enqueued, runs in the daemon as in get: the first server's 404 sends
    /// the file to the next at once, and `-u` goes to the first origin only.
    @Test func aFileWithMirrorsRunsInTheDaemonAsInGet() async throws {
        try await withServer { server in
            try await withServer { other in
                try await withFolder { folder in
                    let store = "sqlite:" + folder.appendingPathComponent("jobs.db").path
                    let input = server.url("/status/404").absoluteString + "\t" + other.url("/bytes/3000").absoluteString
                        + "\n    out=m.bin\n    max-download-limit=10M\n"
                    let enqueued = try await curlq(["enqueue", "--store", store, "--retries", "0", "-i", "-"], input: input)
                    #expect(enqueued.status == 0, "\(enqueued)")
                    let daemon = try await curlq(["daemon", "--store", store, "-d", folder.path, "--exit-when-done", "-u", "alice:\(Self.password)"])
                    #expect(daemon.status == 0, "\(daemon)")
                    #expect(contents(folder.appendingPathComponent("m.bin")) == FixtureServer.expectedBytes(count: 3000))
                    let status = try await curlq(["status", "--store", store, "--json"])
                    let job = try #require((try status.json()["jobs"] as? [[String: Any]])?.first)
                    #expect(job["state"] as? String == "done" && job["attempt"] as? Int == 2, "two tries though --retries 0: one per mirror; \(job)")
                    let basic = "Basic " + Data("alice:\(Self.password)".utf8).base64EncodedString()
                    #expect(server.requests.first { $0.path == "/status/404" }?.header("Authorization") == basic)
                    #expect(other.requests.count == 1 && other.requests.allSatisfy { $0.header("Authorization") == nil }, "-u is for the first origin")
                }
            }
        }
    }

    /// An input file with several bad lines: enqueue names every one, and stores nothing.
    @Test func enqueueNamesEveryBadLine() async throws {
        try await withFolder { folder in
            let store = "sqlite:" + folder.appendingPathComponent("jobs.db").path
            let input = "http://127.0.0.1:9/a\n    max-download-limit=fast\nhttp://127.0.0.1:9/b\n    prio=high\nhttp://127.0.0.1:9/c\n"
            let enqueued = try await curlq(["enqueue", "--store", store, "-i", "-"], input: input)
            #expect(enqueued.status == 2, "\(enqueued)")
            #expect(enqueued.stderr.contains("standard input:2: max-download-limit= takes bytes per second"), "\(enqueued)")
            #expect(enqueued.stderr.contains("standard input:4: unknown key"), "\(enqueued)")
            #expect(enqueued.stderr.contains("nothing was enqueued"), "\(enqueued)")
            #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("jobs.db").path), "no store was even made")
        }
    }

    /// A `get --session` file shown with no `--queue`: a hint on standard error.
    @Test func statusOfASessionFileNamesItsQueue() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let session = folder.appendingPathComponent("s.session")
                #expect(try await curlq(["get", "--session", session.path, "-d", folder.path, server.url("/bytes/10").absoluteString]).status == 0)
                let status = try await curlq(["status", "--store", "sqlite:" + session.path])
                #expect(status.status == 0 && status.stderr.contains("add --queue curlq-get"), "\(status)")
            }
        }
    }

    /// The reason up to its advice (after the first `;`), without the "(after N attempts)" a
    /// transient failure on the way adds (a loaded fixture may reset a connection once; the
    /// 503's attempts are checked on their own).
    static func beforeAdvice(_ reason: String) -> String {
        let words = String(reason.split(separator: ";", maxSplits: 1).first ?? "")
        guard let range = words.range(of: #" \(after \d+ attempts\)$"#, options: .regularExpression) else { return words }
        return String(words[..<range.lowerBound])
    }
}
