@testable import curlq
import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// curlq's messages (issue 22, "Messages a person can act on"), against the fixture server.
@Suite struct CurlqMessagesTests {
    @Test func aUserAgentIsSentByDefaultAndCanBeChanged() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let url = server.url("/bytes/10").absoluteString
                func agent(_ arguments: String...) async throws -> String? {
                    let run = try await curlq(["get", "-q", "--overwrite", "-d", folder.path] + arguments + [url])
                    #expect(run.status == 0, "\(run)")
                    return server.requests.last?.header("User-Agent")
                }
                #expect(try await agent() == "curlq/\(CurlqVersion.number)")
                #expect(try await agent("-A", "Mozilla/5.0 (X11)") == "Mozilla/5.0 (X11)")
                #expect(try await agent("--user-agent", "mine/1", "-H", "User-Agent: byhand/2") == "byhand/2")
                #expect(try await agent("-A", "") == nil)
                let bad = try await curlq("get", "-A", "a\u{1}b", url)
                #expect(bad.status == 2 && bad.stderr.contains("-A/--user-agent"), "\(bad)")
            }
        }
    }

    /// Each retry line says when the next try comes and why the last one failed: the status,
    /// or the network error in words.
    @Test func retryLinesSayWhyAndWhen() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let flaky = try await curlq("get", "-d", folder.path, "--progress", "lines", server.url("/flaky/r?failures=1").absoluteString)
                #expect(flaky.status == 0, "\(flaky)")
                #expect(flaky.stderr.contains(/retry    r  retrying in \d+\.\ds \(attempt 2 of 6\): HTTP 503 Service Unavailable\n/), "\(flaky.stderr)")
                let refused = try await withRefusingPort { port in
                    try await curlq("get", "-d", folder.path, "--progress", "lines", "--retries", "1", "http://127.0.0.1:\(port)/closed")
                }
                #expect(refused.status == 1, "\(refused)")
                #expect(refused.stderr.contains(/retry    closed  retrying in \d+\.\ds \(attempt 2 of 2\): could not connect/), "\(refused.stderr)")
                #expect(refused.stderr.contains("closed: could not connect (connection refused, or the host is unreachable) (after 2 attempts)"),
                        "\(refused.stderr)")
                #expect(!refused.stderr.contains("CURLE_"), "\(refused.stderr)")
            }
        }
    }

    /// A host name that does not resolve fails at once (as curl's --retry leaves it alone),
    /// not after seconds of silent retries; --retry-dns retries it. Names under .invalid never
    /// resolve (RFC 6761), and the resolver says so in milliseconds here, network or not.
    @Test func aHostThatDoesNotResolveFailsAtOnceUnlessRetryDNS() async throws {
        try await withFolder { folder in
            let once = try await curlq("get", "-d", folder.path, "--json", "--progress", "lines", "http://nowhere.invalid/file")
            #expect(once.status == 1, "\(once)")
            let report = try #require(try once.jsonFiles().first)
            #expect(report["attempts"] as? Int == 1, "\(report)")
            #expect(!once.stderr.contains("retry "), "\(once.stderr)")
            #expect(once.stderr.contains("file: the host name 'nowhere.invalid' does not resolve (DNS); check its spelling"), "\(once.stderr)")
            // No wall-clock bound (a loaded machine took 11 s to start and run curlq): one attempt
            // and no retry line are what "at once" means, where five retries waited 7 s and more.

            let retried = try await curlq("get", "-d", folder.path, "--json", "--progress", "lines", "--retries", "1", "--retry-dns",
                                         "http://nowhere.invalid/file")
            #expect(retried.status == 1)
            #expect(try retried.jsonFiles().first?["attempts"] as? Int == 2, "\(retried)")
            #expect(retried.stderr.contains("(attempt 2 of 2): the host name 'nowhere.invalid' does not resolve (DNS)\n"), "\(retried.stderr)")
        }
    }

    /// Standard error not a terminal (`--progress lines`, what `auto` picks in CI): a line per
    /// running file every --progress-interval seconds, with bytes, size and speed. The test waits
    /// for the line itself; the file drips for about 3 s, so it is still running when it comes.
    @Test func aCILogGetsAProgressLinePerRunningFile() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let process = try CurlqProcess(["get", "-d", folder.path, "--progress", "lines", "--progress-interval", "0.5",
                                                server.url("/bytes/300000?drip=100&chunk=10000").absoluteString])
                #expect(await process.waitForError(containing: "progress 300000  "), "no progress line came")
                let run = await process.finish()
                #expect(run.status == 0, "\(run)")
                #expect(run.stderr.contains(/progress 300000  [0-9.]+ (B|KiB) \/ 293 KiB \(\d+%\), ([0-9.]+ (B|KiB)\/s|--)/), "\(run.stderr)")
                let lines = run.stderr.split(separator: "\n")
                let first = try #require(lines.firstIndex { $0.hasPrefix("progress ") })
                let start = try #require(lines.firstIndex { $0.hasPrefix("start ") })
                let done = try #require(lines.firstIndex { $0.hasPrefix("done ") })
                #expect(start < first && first < done, "\(run.stderr)")
            }
        }
    }

    /// An output folder that cannot be written to (or made) is a usage error found before any
    /// request: exit 2, the folder named and why, in words.
    @Test func anUnwritableFolderIsFoundBeforeAnyRequest() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let url = server.url("/bytes/10").absoluteString
                let blocker = folder.appendingPathComponent("file.txt")
                try Data("x".utf8).write(to: blocker)
                var cases: [([String], String)] = [
                    // /sys refuses new files even to root, which ignores a folder's permissions.
                    (["-d", "/sys"], "cannot write into the folder '/sys': "),
                    (["-o", "/sys/out.bin"], "cannot write into the folder '/sys': "),
                    (["-d", blocker.path + "/sub"], "'\(blocker.path)' is a file, not a folder"),
                ]
                if getuid() != 0 {
                    let locked = folder.appendingPathComponent("locked")
                    try FileManager.default.createDirectory(at: locked, withIntermediateDirectories: false)
                    chmod(locked.path, 0o555)
                    cases.append((["-d", locked.path], "cannot write into the folder '\(locked.path)': Permission denied"))
                }
                for (arguments, message) in cases {
                    let run = try await curlq(["get"] + arguments + [url])
                    #expect(run.status == 2, "\(arguments): \(run)")
                    #expect(run.stderr.contains(message), "\(arguments): \(run.stderr)")
                    #expect(!run.stderr.contains("NSCocoaErrorDomain") && !run.stderr.contains("Error"), "\(run.stderr)")
                }
                #expect(server.requests.isEmpty, "a request was sent: \(server.requests.map(\.uri))")
            }
        }
    }

    /// No internal names in what a person reads: a batch with a 404, a refused connection, a
    /// host that does not resolve and a dropped connection says each in words, on standard
    /// error and in the JSON report.
    ///
    /// The dropped URL drops every request (`failures=1000`), not only the first: whichever
    /// connection it goes out on, it is reported dropped. With one failure it sometimes
    /// succeeded: when the 404 finished first, the request went out on its reused connection,
    /// and libcurl's own silent retry of a request whose reused connection dies before any
    /// response byte used up the fixture's one failure (seen under ThreadSanitizer).
    @Test func noInternalNamesInMessages() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let run = try await withRefusingPort { port in
                    try await curlq("get", "-d", folder.path, "--retries", "0", "--json", "--progress", "lines",
                                   server.url("/status/404").absoluteString, "http://127.0.0.1:\(port)/refused",
                                   "http://nowhere.invalid/dns", server.url("/flaky/dropped?failures=1000&mode=close").absoluteString)
                }
                #expect(run.status == 1, "\(run)")
                for name in ["CURLE_", "NSCocoaErrorDomain", "error 512", "RequestError", "TransportFailure", "CurlCode", "Optional(", "transport("] {
                    #expect(!run.stderr.contains(name), "standard error names \(name): \(run.stderr)")
                    #expect(!run.stdout.contains(name), "the JSON report names \(name): \(run.stdout)")
                }
                #expect(run.stderr.contains("dropped: the server closed the connection without answering"), "\(run.stderr)")
            }
        }
    }

    /// Ctrl-C (a real SIGINT) with twelve files still waiting: one line says so, not twelve.
    @Test func ctrlCSummarisesTheFilesThatNeverStartedInOneLine() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let waiting = (1...12).map { server.url("/bytes/\($0)").absoluteString }
                let process = try CurlqProcess(["get", "-d", folder.path, "-j", "1", "--progress", "lines",
                                                server.url("/gate/never").absoluteString] + waiting)
                try await server.waitForRequests(pathPrefix: "/gate/", count: 1)
                process.send(SIGINT)
                let run = await process.finish()
                #expect(run.status == 130, "\(run)")
                #expect(run.stderr.contains("curlq: 12 not started\n"), "\(run.stderr)")
                let stopped = run.stderr.split(separator: "\n").filter { $0.hasPrefix("stopped ") }
                #expect(stopped.count == 1, "one line for the file that had started: \(stopped)")
                #expect(run.stderr.contains("Not finished: 13"), "\(run.stderr)")
            }
        }
    }

    /// Ctrl-Z (SIGTSTP): the live area is erased and the cursor shown before the process
    /// stops; SIGCONT (fg) draws it again, cursor hidden.
    @Test func ctrlZRestoresTheCursorAndContinueRedraws() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let process = try CurlqProcess(["get", "-d", folder.path, "--progress", "bar", server.url("/gate/never").absoluteString])
                try await server.waitForRequests(pathPrefix: "/gate/", count: 1)
                #expect(await process.waitForError(containing: Terminal.hideCursor))
                process.send(SIGTSTP)
                #expect(await process.waitUntilStopped(), "SIGTSTP did not stop curlq")
                // Stopped: nothing more comes, and what came last shows the cursor (the bytes may
                // still be on their way to this process's reader: wait for them, not for time).
                let shown = await process.waitForError(timeout: 10) { $0.hasSuffix(Terminal.showCursor) }
                let tail = await process.errorSoFar().debugDescription.suffix(80)
                #expect(shown, "the cursor was not shown before stopping: \(tail)")
                process.send(SIGCONT)
                #expect(await process.waitForError { text in
                    guard let shown = text.range(of: Terminal.showCursor, options: .backwards) else { return false }
                    return text[shown.upperBound...].contains(Terminal.hideCursor)
                }, "no redraw after SIGCONT")
                process.send(SIGINT)
                let run = await process.finish()
                #expect(run.status == 130, "\(run)")
            }
        }
    }
}

/// `curlq --version`, as `curl -V`: curlq's version, libcurl's, its TLS library, protocols, features.
@Suite struct CurlqVersionTests {
    @Test func versionNamesLibcurlItsTLSLibraryAndFeatures() async throws {
        let run = try await curlq("--version")
        #expect(run.status == 0, "\(run)")
        let lines = run.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("curlq \(CurlqVersion.number) (libcurl/") == true, "\(run.stdout)")
        #expect(lines.contains { $0.hasPrefix("libcurl ") && $0.contains(", TLS: ") }, "\(run.stdout)")
        // Only what curlq takes (issue 36): libcurl's ftp, file, … would promise what curlq refuses.
        #expect(lines.contains { $0 == "Protocols: http https" }, "\(run.stdout)")
        #expect(lines.contains { $0.hasPrefix("Features: ") && $0.contains("SSL") }, "\(run.stdout)")
    }
}

/// What docs/curlq.md promises beside the options: shell completion and the proxy variables.
@Suite struct CurlqEnvironmentTests {
    @Test func completionScriptsForBashZshAndFish() async throws {
        for shell in ["bash", "zsh", "fish"] {
            let run = try await curlq("--generate-completion-script", shell)
            #expect(run.status == 0, "\(shell): \(run)")
            #expect(run.stdout.contains("user-agent") && run.stdout.contains("retry-dns"), "\(shell)")
        }
    }

    /// libcurl's proxy variables work: curlq does not turn them off. The fixture server plays
    /// the proxy and records the request in absolute form for a host that does not exist.
    @Test func httpProxyIsHonoured() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let proxy = "http://127.0.0.1:\(server.port)"
                let run = try await curlq(["get", "-d", folder.path, "--retries", "0", "http://through-proxy.invalid/bytes/10"],
                                          environment: ["http_proxy": proxy, "NO_PROXY": ""])
                #expect(server.requests.contains { $0.uri.hasPrefix("http://through-proxy.invalid/") }, "\(run) \(server.requests.map(\.uri))")
                let skipped = try await curlq(["get", "-d", folder.path, "--retries", "0", "--overwrite", "http://through-proxy.invalid/bytes/10"],
                                              environment: ["http_proxy": proxy, "NO_PROXY": "through-proxy.invalid"])
                #expect(skipped.stderr.contains("does not resolve"), "NO_PROXY was not honoured: \(skipped)")
            }
        }
    }
}
