@testable import curlq
import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Dispatch
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

// End-to-end tests of the `curlq` executable: the binary built next to the tests runs as a
// subprocess against a fixture server started by each test. Every wait is for an event: the
// process's exit, a request reaching the server, or a file growing (inotify).

/// How a run of `curlq` ended.
fileprivate struct CurlqRun: CustomStringConvertible {
    /// The exit status, or 128 + the signal that killed it.
    var status: Int32
    var killedBySignal: Bool
    var stdout: String
    var stderr: String
    /// Peak resident memory of the process, from `wait4`.
    var peakMemoryKiB: Int
    var seconds: Double

    var description: String { "status \(status)\nstdout: \(stdout)\nstderr: \(stderr)" }

    /// Standard output parsed as one JSON object.
    func json() throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: Data(stdout.utf8))
        return try #require(object as? [String: Any], "stdout is not a JSON object: \(stdout)")
    }

    /// The `files` of the JSON report, in input order.
    func jsonFiles() throws -> [[String: Any]] {
        try #require(try json()["files"] as? [[String: Any]])
    }
}

/// A running `curlq`, started with `posix_spawn`; it reports its own peak memory at exit.
fileprivate final class CurlqProcess: @unchecked Sendable {  // safe: `pid` is immutable; results arrive once through continuations
    let pid: pid_t
    private let stdoutPipe: Int32
    private let stderrPipe: Int32
    private let started = Date()

    static var executable: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("curlq").path
    }

    /// Starts `curlq arguments…` in `directory`, with `input` on its standard input
    /// (else /dev/null) and NO_COLOR set.
    init(_ arguments: [String], input: Data? = nil, in directory: URL? = nil, environment extra: [String: String] = [:]) throws {
        // Socket pairs made close-on-exec atomically, so that a curlq started at the same time
        // by another test cannot inherit them (and hold this one's output open).
        func makePipe() throws -> (read: Int32, write: Int32) {
            var fds: [Int32] = [0, 0]
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else {
                throw POSIXError(.init(rawValue: errno) ?? .EIO)
            }
            return (fds[0], fds[1])
        }
        let out = try makePipe()
        let err = try makePipe()
        let stdin = try makePipe()

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if input != nil {
            posix_spawn_file_actions_adddup2(&actions, stdin.read, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        posix_spawn_file_actions_adddup2(&actions, out.write, 1)
        posix_spawn_file_actions_adddup2(&actions, err.write, 2)

        var environment = ProcessInfo.processInfo.environment
        environment["NO_COLOR"] = "1"
        environment["CURLQ_REPORT_PEAK_MEMORY"] = "1"
        environment.merge(extra) { $1 }
        // In another folder: through `sh -c 'cd … && exec curlq …'`, so that the process waited
        // for is still curlq itself.
        let command = directory.map { ["/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", $0.path, Self.executable] } ?? [Self.executable]
        let argv = (command + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, command[0], &actions, nil, argv, envp)
        close(out.write)
        close(err.write)
        close(stdin.read)
        guard spawned == 0 else {
            close(out.read)
            close(err.read)
            close(stdin.write)
            throw POSIXError(.init(rawValue: spawned) ?? .EIO)
        }
        self.pid = pid
        self.stdoutPipe = out.read
        self.stderrPipe = err.read
        let writer = stdin.write
        Thread {
            if let input {
                input.withUnsafeBytes { bytes in
                    var offset = 0
                    while offset < bytes.count {
                        let written = write(writer, bytes.baseAddress! + offset, bytes.count - offset)
                        if written <= 0 { break }
                        offset += written
                    }
                }
            }
            close(writer)
        }.start()
    }

    func send(_ signal: Int32) { kill(pid, signal) }

    /// curlq's own VmHWM, from the line `CURLQ_REPORT_PEAK_MEMORY` makes it print at exit
    /// (`rusage` cannot tell: a child's `ru_maxrss` counts this test process's memory too).
    static func withoutMemoryReport(_ stderr: String) -> String {
        guard let range = stderr.range(of: "curlq: peak memory ", options: .backwards),
              stderr[range.lowerBound...].hasSuffix(" KiB\n") else { return stderr }
        return String(stderr[..<range.lowerBound])
    }

    static func peakMemoryKiB(reportedIn stderr: String) -> Int {
        guard let line = stderr.split(separator: "\n").last(where: { $0.hasPrefix("curlq: peak memory ") }) else { return .max }
        return Int(line.split(separator: " ")[3]) ?? .max
    }

    /// Waits for the process to exit (killing it after `timeout` seconds) and collects its output.
    func finish(timeout: Double = 90) async -> CurlqRun {
        async let stdout = Self.readAll(stdoutPipe)
        async let stderr = Self.readAll(stderrPipe)
        let pid = self.pid
        let watchdog = DispatchWorkItem { kill(pid, SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: watchdog)
        let status = await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
            Thread {
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                continuation.resume(returning: status)
            }.start()
        }
        watchdog.cancel()
        let signalled = status & 0x7F != 0
        return CurlqRun(
            status: signalled ? 128 + (status & 0x7F) : (status >> 8) & 0xFF, killedBySignal: signalled,
            stdout: await stdout, stderr: Self.withoutMemoryReport(await stderr),
            peakMemoryKiB: Self.peakMemoryKiB(reportedIn: await stderr),
            seconds: Date().timeIntervalSince(started))
    }

    private static func readAll(_ descriptor: Int32) async -> String {
        await withCheckedContinuation { continuation in
            Thread {
                var data = Data()
                var buffer = [UInt8](repeating: 0, count: 65536)
                while true {
                    let count = read(descriptor, &buffer, buffer.count)
                    if count < 0 && errno == EINTR { continue }
                    if count <= 0 { break }
                    data.append(buffer, count: count)
                }
                close(descriptor)
                continuation.resume(returning: String(decoding: data, as: UTF8.self))
            }.start()
        }
    }
}

/// Runs `curlq` to its end.
fileprivate func curlq(_ arguments: String..., input: String? = nil, in directory: URL? = nil) async throws -> CurlqRun {
    try await CurlqProcess(arguments, input: input.map { Data($0.utf8) }, in: directory).finish()
}

fileprivate func curlq(_ arguments: [String], input: String? = nil) async throws -> CurlqRun {
    try await CurlqProcess(arguments, input: input.map { Data($0.utf8) }).finish()
}

/// Waits, woken by inotify, until the file at `path` holds at least `bytes` bytes.
fileprivate func waitForFile(_ path: String, atLeast bytes: Int64, timeout: Double = 20) async -> Bool {
    await withCheckedContinuation { continuation in
        Thread {
            let watcher = inotify_init1(Int32(IN_CLOEXEC))
            defer { close(watcher) }
            let folder = (path as NSString).deletingLastPathComponent
            _ = inotify_add_watch(watcher, folder, UInt32(IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE))
            let deadline = Date().addingTimeInterval(timeout)
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                if let size = (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber,
                   size.int64Value >= bytes {
                    continuation.resume(returning: true)
                    return
                }
                let remaining = deadline.timeIntervalSinceNow
                if remaining <= 0 {
                    continuation.resume(returning: false)
                    return
                }
                var descriptor = pollfd(fd: watcher, events: Int16(POLLIN), revents: 0)
                if poll(&descriptor, 1, Int32(min(remaining, 1) * 1000)) > 0 { _ = read(watcher, &buffer, buffer.count) }
            }
        }.start()
    }
}

fileprivate func contents(_ url: URL) -> [UInt8]? { (try? Data(contentsOf: url)).map(Array.init) }
fileprivate func files(in folder: URL) -> [String] { ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).sorted() }

/// A port bound on 127.0.0.1 but not listening, so that connecting to it is refused, for the
/// duration of `body`.
fileprivate func withRefusingPort<T>(_ body: (Int) async throws -> T) async throws -> T {
    let (socket, address) = try loopbackSocket(listening: false)
    defer { close(socket) }
    return try await body(Int(UInt16(bigEndian: address.sin_port)))
}

/// A TCP socket bound to an ephemeral port on 127.0.0.1 (listening with a backlog of 0 when
/// `listening`), and its address.
fileprivate func loopbackSocket(listening: Bool) throws -> (Int32, sockaddr_in) {
    let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
            bind(socket, raw, length) == 0 && (!listening || listen(socket, 0) == 0)
                && getsockname(socket, raw, &length) == 0
        }
    }
    guard bound else {
        close(socket)
        throw POSIXError(.EADDRINUSE)
    }
    return (socket, address)
}

/// Whether the tests (and so the curlq built with them) run under a sanitizer: the project's
/// scripts say so in CURLQUEUE_SANITIZER, and a plain `swift test --sanitize=thread` leaves
/// ThreadSanitizer's runtime in the process.
fileprivate let underSanitizer = ProcessInfo.processInfo.environment["CURLQUEUE_SANITIZER"] != nil
    || dlsym(nil, "__tsan_init") != nil || dlsym(nil, "__asan_init") != nil  // nil is RTLD_DEFAULT

@Suite struct CurlqTests {
    // MARK: Help and usage errors

    @Test func helpShowsUsageWithExamples() async throws {
        let root = try await curlq("--help")
        #expect(root.status == 0)
        #expect(root.stdout.contains("USAGE: curlq <subcommand>"))
        #expect(root.stdout.contains("EXAMPLES:"))
        #expect(root.stdout.contains("curlq get -i urls.txt"))
        #expect(root.stdout.contains("demo"))
        let get = try await curlq("get", "--help")
        #expect(get.status == 0)
        #expect(get.stdout.contains("USAGE: curlq get [<options>] [<URL> ...]"))
        #expect(get.stdout.contains("EXAMPLES:"))
        for option in ["--input", "--dir", "--jobs", "--per-host", "--order", "--retries", "--retry-http", "--max-file-time", "--stall-timeout",
                       "--connect-timeout", "--continue", "--overwrite", "--header", "--json", "--quiet", "--progress"] {
            #expect(get.stdout.contains(option), "get --help lacks \(option)")
        }
        #expect(try await curlq("help", "get").stdout == get.stdout)
    }

    @Test func usageErrorsExitTwoBeforeAnyRequest() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let good = server.url("/bytes/10").absoluteString
                let input = folder.appendingPathComponent("urls.txt")
                try "# list\n\(good)\n  out=a\n\(good)\n  priority=urgent\n".write(to: input, atomically: true, encoding: .utf8)
                let cases: [([String], String)] = [
                    (["get", "--bogus", good], "Unknown option '--bogus'"),
                    (["get", "-j", "many", good], "'many' is invalid"),
                    (["get", "-j", "-1", good], "Missing value for '-j <N>'"),
                    (["get", "--jobs=-1", good], "--jobs must be 0"),
                    (["get", "--per-host=-2", good], "--per-host must be 0"),
                    (["get", "--retries=-1", good], "--retries must be 0"),
                    (["get", "--retry-http", "503,abc", good], "--retry-http"),
                    (["get", "--max-file-time", "0", good], "--max-file-time"),
                    (["get", "--stall-timeout", "-1", good], "--stall-timeout"),
                    (["get", "--max-file-time", "soon", good], "'soon' is invalid"),
                    (["get", "--connect-timeout", "nan", good], "--connect-timeout"),
                    (["get", "--order", "random", good], "'random' is invalid"),
                    (["get", "--progress", "fancy", good], "'fancy' is invalid"),
                    (["get", "-H", "NoColon", good], "Name: value"),
                    (["get", "-H", "X-A: b\u{1}", good], "control character"),
                    (["get", "not-a-url"], "not a URL"),
                    (["get", "ftp://example.org/x"], "only http and https"),
                    (["get"], "give at least one URL"),
                    (["get", "-i", folder.appendingPathComponent("missing.txt").path], "cannot read the input file"),
                    (["get", "-i", folder.path], "cannot read the input file"),
                    (["get", "-i", input.path, good], "urls.txt:5: priority must be high, normal or low"),
                    (["get", "-d", input.path, good], "is not a folder"),
                    (["frobnicate"], "Unexpected argument 'frobnicate'"),
                ]
                for (arguments, message) in cases {
                    let run = try await curlq(arguments)
                    #expect(run.status == 2, "\(arguments): \(run)")
                    #expect(run.stderr.contains(message), "\(arguments): \(run.stderr)")
                    #expect(run.stdout.isEmpty)
                }
                let stdin = try await curlq("get", "-d", folder.path, "-i", "-", input: "\(good)\n\n  header=Bad Header\n")
                #expect(stdin.status == 2)
                #expect(stdin.stderr.contains("standard input:3:"), "\(stdin.stderr)")
                #expect(server.requests.isEmpty, "a usage error sent \(server.requests.count) request(s)")
                #expect(files(in: folder) == ["urls.txt"])
            }
        }
    }

    // MARK: Downloading

    @Test func downloadsArgumentsIntoAFolderItCreates() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let target = folder.appendingPathComponent("new/nested")
                let run = try await curlq("get", "-d", target.path, "--progress", "lines",
                                          server.url("/bytes/300000").absoluteString, server.url("/bytes/5?chunked=1").absoluteString)
                #expect(run.status == 0, "\(run)")
                #expect(run.stdout.isEmpty)
                #expect(files(in: target) == ["300000", "5"])
                #expect(contents(target.appendingPathComponent("300000")) == FixtureServer.expectedBytes(count: 300_000))
                #expect(contents(target.appendingPathComponent("5")) == FixtureServer.expectedBytes(count: 5))
                #expect(run.stderr.contains("Done in"))
                #expect(run.stderr.contains("2 downloaded"))
            }
        }
    }

    @Test func theCurrentFolderIsTheDefault() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let run = try await curlq("get", "-q", server.url("/bytes/123").absoluteString, in: folder)
                #expect(run.status == 0, "\(run)")
                #expect(run.stderr.isEmpty, "--quiet printed: \(run.stderr)")
                #expect(contents(folder.appendingPathComponent("123")) == FixtureServer.expectedBytes(count: 123))
            }
        }
    }

    @Test func anInputFileWithCommentsAndOptions() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let body = FixtureServer.expectedBytes(count: 70_000)
                let input = folder.appendingPathComponent("urls.txt")
                try """
                    # two files and an echo
                    \(server.url("/bytes/70000"))
                        out=seventy.bin
                        sha256=\(SHA256.hex(of: body))

                    \(server.url("/echo"))\r
                    \tout=echo.json\r
                    \theader=X-Token: abc\r
                    \(server.url("/bytes/10"))
                        priority=low
                    """.write(to: input, atomically: true, encoding: .utf8)
                let run = try await curlq("get", "-i", input.path, "-d", folder.appendingPathComponent("out").path)
                #expect(run.status == 0, "\(run)")
                let out = folder.appendingPathComponent("out")
                #expect(files(in: out) == ["10", "echo.json", "seventy.bin"])
                #expect(contents(out.appendingPathComponent("seventy.bin")) == body)
                let echo = try JSONSerialization.jsonObject(with: Data(contentsOf: out.appendingPathComponent("echo.json"))) as? [String: Any]
                let headers = (echo?["headers"] as? [[String]]) ?? []
                #expect(headers.contains(["X-Token", "abc"]), "\(headers)")
            }
        }
    }

    @Test func urlsFromStandardInput() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let input = "\(server.url("/bytes/1000"))\n  out=one\n\(server.url("/bytes/2000"))\n"
                let run = try await curlq("get", "-i", "-", "-d", folder.path, "--progress", "none", input: input)
                #expect(run.status == 0, "\(run)")
                #expect(files(in: folder) == ["2000", "one"])
                #expect(!run.stderr.contains("start "), "--progress none printed progress lines")
                #expect(run.stderr.contains("2 downloaded"))
            }
        }
    }

    @Test func aFailedFileExitsOneWithItsReason() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let run = try await withRefusingPort { port in
                    try await curlq("get", "-d", folder.path, "--retries", "0", server.url("/bytes/100").absoluteString,
                                    server.url("/status/404").absoluteString, "http://127.0.0.1:\(port)/nothing-listens")
                }
                #expect(run.status == 1, "\(run)")
                #expect(files(in: folder) == ["100"])
                #expect(run.stderr.contains("404: HTTP 404 Not Found (\(server.url("/status/404")))"), "\(run.stderr)")
                #expect(run.stderr.contains("nothing-listens: CURLE_COULDNT_CONNECT"), "\(run.stderr)")
                #expect(run.stderr.contains("1 downloaded, 2 failed of 3 files"))
                let quiet = try await curlq("get", "-q", "-d", folder.path, "--overwrite", server.url("/status/404").absoluteString)
                #expect(quiet.status == 1)
                #expect(quiet.stderr == "curlq: failed: 404: HTTP 404 Not Found (\(server.url("/status/404")))\n", "\(quiet.stderr)")
            }
        }
    }

    /// A password in a URL is sent (as Basic credentials) but never shown: not on the start
    /// lines, nor in the summary of failures, which end up in terminals and CI logs. Nor is the
    /// user (often a token itself) or a secret query value.
    @Test func aPasswordInAURLIsNotShownOnStandardError() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let base = "http://reader:s3cr3t@127.0.0.1:\(server.port)"
                let run = try await curlq("get", "-d", folder.path, "--retries", "0", "--progress", "lines", "--json",
                                          base + "/bytes/100", base + "/status/404?private_token=QTOKEN&page=2")
                #expect(run.status == 1, "\(run)")
                #expect(files(in: folder) == ["100"])
                #expect(server.requests.map { $0.header("Authorization") } == ["Basic cmVhZGVyOnMzY3IzdA==", "Basic cmVhZGVyOnMzY3IzdA=="])
                #expect(!run.stderr.contains("s3cr3t") && !run.stderr.contains("reader") && !run.stderr.contains("QTOKEN"), "\(run.stderr)")
                #expect(run.stderr.contains("start    100  http://REDACTED:REDACTED@127.0.0.1:\(server.port)/bytes/100"), "\(run.stderr)")
                #expect(run.stderr.contains("404: HTTP 404 Not Found (http://REDACTED:REDACTED@127.0.0.1:\(server.port)/status/404?private_token=REDACTED&page=2)"), "\(run.stderr)")
                // The JSON report, for scripts, has each URL as it was given.
                #expect(try run.jsonFiles().map { $0["url"] as? String } == [base + "/bytes/100", base + "/status/404?private_token=QTOKEN&page=2"])
            }
        }
    }

    @Test func aSHA256MismatchIsAFailureAndTheFileIsNotKept() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let wrong = String(repeating: "0", count: 64)
                let right = SHA256.hex(of: FixtureServer.expectedBytes(count: 50_000))
                let input = """
                    \(server.url("/bytes/50000"))
                      out=bad.bin
                      sha256=\(wrong)
                    \(server.url("/bytes/50000?x=1"))
                      out=good.bin
                      sha256=\(right.uppercased())
                    """
                let run = try await curlq("get", "-i", "-", "-d", folder.path, "--json", input: input)
                #expect(run.status == 1, "\(run)")
                #expect(files(in: folder) == ["good.bin"], "bad.bin or its working files were kept")
                #expect(run.stderr.contains("bad.bin: sha256 mismatch: expected \(wrong), got \(right)"), "\(run.stderr)")
                let reports = try run.jsonFiles()
                #expect(reports[0]["sha256"] as? String == right)
                #expect((reports[0]["error"] as? String)?.contains("sha256 mismatch") == true)
                #expect(reports[0]["status"] as? Int == 200)
                #expect(reports[1]["sha256"] as? String == right)
                #expect(reports[1]["error"] is NSNull)
                // An existing file is checked too, and not replaced without --overwrite.
                let again = try await curlq("get", "-i", "-", "-d", folder.path, input: input.replacingOccurrences(of: right.uppercased(), with: wrong))
                #expect(again.status == 1)
                #expect(again.stderr.contains("good.bin is already there but its sha256 is \(right)"), "\(again.stderr)")
                #expect(contents(folder.appendingPathComponent("good.bin")) == FixtureServer.expectedBytes(count: 50_000))
            }
        }
    }

    /// sha512, sha1 and md5 beside sha256: checked as the bytes arrive, or (a resumed `.part`)
    /// from the whole file on disk, so a bad first part written earlier is found too.
    @Test func sha512Sha1AndMD5ChecksumsAreVerified() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let body = FixtureServer.expectedBytes(count: 60_000)
                func digest(_ algorithm: DigestAlgorithm) -> String { FileDigests.hex(algorithm, of: body) }
                #expect(digest(.sha256) == SHA256.hex(of: body))
                // Resumed files: one with the right first bytes, one with wrong ones.
                try Data(body.prefix(20_000)).write(to: folder.appendingPathComponent("resumed.bin.unverified.part"))
                try Data(repeating: 7, count: 20_000).write(to: folder.appendingPathComponent("spliced.bin.unverified.part"))
                let wrongSHA1 = String(repeating: "a", count: 40)
                let input = """
                    \(server.url("/bytes/60000?a=1"))
                      out=a.bin
                      sha512=\(digest(.sha512).uppercased())
                    \(server.url("/bytes/60000?b=1"))
                      out=b.bin
                      sha1=\(wrongSHA1)
                    \(server.url("/bytes/60000?c=1"))
                      out=c.bin
                      md5=\(digest(.md5))
                    \(server.url("/bytes/60000"))
                      out=resumed.bin
                      sha1=\(digest(.sha1))
                    \(server.url("/bytes/60000"))
                      out=spliced.bin
                      md5=\(digest(.md5))
                    """
                let run = try await curlq("get", "-c", "-i", "-", "-d", folder.path, "--json", input: input)
                #expect(run.status == 1, "\(run)")
                #expect(files(in: folder) == ["a.bin", "c.bin", "resumed.bin"], "\(run.stderr)")
                #expect(run.stderr.contains("b.bin: sha1 mismatch: expected \(wrongSHA1), got \(digest(.sha1))"), "\(run.stderr)")
                #expect(run.stderr.contains("spliced.bin: md5 mismatch: expected \(digest(.md5))"), "\(run.stderr)")
                for name in ["a.bin", "c.bin", "resumed.bin"] {
                    #expect(contents(folder.appendingPathComponent(name)) == body, "\(name)")
                }
                let reports = try run.jsonFiles()
                // --json's sha256 comes with every file, the spliced one's being of what it held.
                #expect(reports.prefix(4).map { $0["sha256"] as? String } == Array(repeating: digest(.sha256), count: 4))
                #expect(reports[4]["sha256"] as? String != digest(.sha256))
                #expect(reports[3]["status"] as? Int == 206)

                // A file already there is checked with its own algorithm.
                let again = try await curlq("get", "-i", "-", "-d", folder.path, input: """
                    \(server.url("/bytes/60000?a=1"))
                      out=a.bin
                      sha512=\(String(repeating: "0", count: 128))
                    """)
                #expect(again.status == 1)
                #expect(again.stderr.contains("a.bin is already there but its sha512 is \(digest(.sha512))"), "\(again.stderr)")

                // Bad checksum lines are usage errors.
                let twice = try await curlq("get", "-i", "-", "-d", folder.path, input: """
                    \(server.url("/bytes/1"))
                      sha1=\(digest(.sha1))
                      md5=\(digest(.md5))
                    """)
                #expect(twice.status == 2 && twice.stderr.contains("md5= and sha1= are both given for this URL"), "\(twice.stderr)")
                let short = try await curlq("get", "-i", "-", "-d", folder.path, input: "\(server.url("/bytes/1"))\n  md5=\(digest(.sha1))")
                #expect(short.status == 2 && short.stderr.contains("md5= needs 32 hexadecimal digits"), "\(short.stderr)")
            }
        }
    }

    @Test func hostileNamesStayInsideTheFolder() async throws {
        try await withServer { server in
            try await withFolder { parent in
                let folder = parent.appendingPathComponent("downloads")
                let input = """
                    \(server.baseURL)/flaky/..%2F..%2Fetc%2Fpasswd
                    \(server.url("/bytes/10"))
                      out=../x
                    \(server.url("/bytes/11"))
                      out=../../.hidden
                    \(server.baseURL)/flaky/%2E%2E
                    """
                let run = try await curlq("get", "-i", "-", "-d", folder.path, "--retries", "1", input: input)
                #expect(run.status == 0, "\(run)")
                #expect(files(in: parent) == ["downloads"], "something was written outside the folder")
                #expect(files(in: folder) == ["etc_passwd", "hidden", "index.html", "x"])
                #expect(String(decoding: contents(folder.appendingPathComponent("etc_passwd")) ?? [], as: UTF8.self) == "ok ../../etc/passwd")
                #expect(contents(folder.appendingPathComponent("x")) == FixtureServer.expectedBytes(count: 10))
            }
        }
    }

    @Test func clashingNamesGetNumberSuffixesAndNamesComeFromTheURLAsGiven() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let redirect = server.url("/redirect?to=%2Fbytes%2F20").absoluteString
                let run = try await curlq("get", "-d", folder.path, server.url("/bytes/30?a=1").absoluteString,
                                          server.url("/bytes/30?a=2").absoluteString, server.url("/bytes/30?a=3").absoluteString, redirect)
                #expect(run.status == 0, "\(run)")
                #expect(files(in: folder) == ["30", "30.1", "30.2", "redirect"])
                #expect(contents(folder.appendingPathComponent("redirect")) == FixtureServer.expectedBytes(count: 20))
            }
        }
    }

    /// A file under its final name is "already there" only when its size is the one the server
    /// announces (HEAD): a piece of the file is a failure, left alone, never reported as done.
    /// A skipped file is not hashed for --json when there is no digest to check it against.
    @Test func existingFilesAreSkippedUnlessOverwrite() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let existing = folder.appendingPathComponent("400")
                try Data("mine".utf8).write(to: existing)
                let url = server.url("/bytes/400").absoluteString
                let piece = try await curlq("get", "-d", folder.path, "--progress", "lines", "--json", url)
                #expect(piece.status == 1, "\(piece)")
                #expect(piece.stderr.contains("400 is already there but holds 4 bytes where the server announces 400; --overwrite replaces it"),
                        "\(piece.stderr)")
                #expect(contents(existing) == Array("mine".utf8))
                #expect(server.requests.map(\.method) == ["HEAD"])

                try Data(FixtureServer.expectedBytes(count: 400)).write(to: existing)
                let skipped = try await curlq("get", "-d", folder.path, "--progress", "lines", "--json", url)
                #expect(skipped.status == 0, "\(skipped)")
                #expect(skipped.stderr.contains("skipped  400  already there"), "\(skipped.stderr)")
                #expect(skipped.stderr.contains("1 already there"))
                #expect(server.requests.map(\.method) == ["HEAD", "HEAD"])
                let report = try #require(try skipped.jsonFiles().first)
                #expect(report["status"] is NSNull && report["error"] is NSNull && report["attempts"] as? Int == 0)
                #expect(report["bytes"] as? Int == 400)
                #expect(report["sha256"] is NSNull)

                try Data("mine".utf8).write(to: existing)
                let replaced = try await curlq("get", "-d", folder.path, "--overwrite", url)
                #expect(replaced.status == 0, "\(replaced)")
                #expect(contents(existing) == FixtureServer.expectedBytes(count: 400))
            }
        }
    }

    @Test func partFilesStartOverWithoutContinueAndResumeWithIt() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let body = FixtureServer.expectedBytes(count: 200_000)
                let part = folder.appendingPathComponent("200000.part")
                // Without -c, a .part (here of the wrong content) is not trusted: it starts over.
                try Data(repeating: 0xAA, count: 50_000).write(to: part)
                let fresh = try await curlq("get", "-d", folder.path, server.url("/bytes/200000").absoluteString)
                #expect(fresh.status == 0, "\(fresh)")
                #expect(contents(folder.appendingPathComponent("200000")) == body)
                #expect(server.requests.last?.header("Range") == nil)
                #expect(!exists(part))

                // With -c and --overwrite, an existing file is replaced and its .part resumed.
                try Data(body[0..<80_000]).write(to: part)
                let resumed = try await curlq("get", "-c", "--overwrite", "--progress", "lines", "-d", folder.path,
                                              server.url("/bytes/200000").absoluteString)
                #expect(resumed.status == 0, "\(resumed)")
                #expect(server.requests.last?.header("Range") == "bytes=80000-")
                #expect(resumed.stderr.contains("resuming after 78.1 KiB"), "\(resumed.stderr)")
                #expect(contents(folder.appendingPathComponent("200000")) == body)
            }
        }
    }

    /// However fast a file ends, its start line (with the resume) comes first, exactly once,
    /// and the summary after every start and done line. The start used to be shown on the
    /// queue's `.started` event, which reaches curlq through another task: a transfer that
    /// ended first (or the end of the batch) left the file without a start line.
    @Test func everyFileStartsBeforeItEndsHoweverFast() async throws {
        try await withServer { server in
            try await withFolder { folder in
                // Empty files, and files resumed one byte before their end: transfers that end at once.
                let whole = FixtureServer.expectedBytes(count: 1000)
                var input = ""
                var names: [String] = []
                for n in 0..<60 {
                    input += "\(server.url("/bytes/0?n=\(n)").absoluteString)\n  out=empty-\(n)\n"
                    input += "\(server.url("/bytes/1000?n=\(n)").absoluteString)\n  out=nearly-\(n)\n"
                    try Data(whole[0..<999]).write(to: folder.appendingPathComponent("nearly-\(n).part"))
                    names += ["empty-\(n)", "nearly-\(n)"]
                }
                let run = try await curlq("get", "-c", "-j", "8", "--progress", "lines", "-d", folder.path, "-i", "-",
                                          input: input)
                #expect(run.status == 0, "\(run)")
                let lines = run.stderr.split(separator: "\n").map(String.init)
                let summary = try #require(lines.firstIndex { $0.hasPrefix("Done in") }, "\(run.stderr)")
                var starts: [String: [Int]] = [:], ends: [String: [Int]] = [:]
                for (number, line) in lines.enumerated() {
                    let words = line.split(separator: " ")
                    guard words.count > 1 else { continue }
                    if words[0] == "start" { starts[String(words[1]), default: []].append(number) }
                    if words[0] == "done" { ends[String(words[1]), default: []].append(number) }
                    if words[0] == "start", words[1].hasPrefix("nearly-") {
                        #expect(line.hasSuffix("(resuming after 999 B)"), "\(line)")
                    }
                }
                for name in names {
                    let start = starts[name] ?? [], end = ends[name] ?? []
                    #expect(start.count == 1 && end.count == 1, "\(name): \(start.count) start and \(end.count) done lines\n\(run.stderr)")
                    if let start = start.first, let end = end.first {
                        #expect(start < end && end < summary, "\(name): start on line \(start), done on \(end), summary on \(summary)")
                    }
                }
                #expect(contents(folder.appendingPathComponent("nearly-7")) == whole)
                #expect(contents(folder.appendingPathComponent("empty-7")) == [UInt8]())
            }
        }
    }

    /// A server that ignores the Range sends the whole file again: curlq must not report a
    /// resume that did not happen, nor count only the bytes past the old `.part`.
    @Test func aResumeTheServerIgnoredIsNotReportedAsOne() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let body = FixtureServer.expectedBytes(count: 200_000)
                try Data(body[0..<150_000]).write(to: folder.appendingPathComponent("200000.part"))
                let run = try await curlq("get", "-c", "--progress", "lines", "-d", folder.path,
                                          server.url("/bytes/200000?norange=1").absoluteString)
                #expect(run.status == 0, "\(run)")
                #expect(server.requests.last?.header("Range") == "bytes=150000-")
                #expect(contents(folder.appendingPathComponent("200000")) == body)
                #expect(run.stderr.contains("resuming after 146 KiB"), "\(run.stderr)")
                #expect(!run.stderr.contains("(resumed:"), "\(run.stderr)")
                #expect(run.stderr.contains("\n195 KiB received"), "\(run.stderr)")
            }
        }
    }

    // MARK: Interruption

    @Test func anInterruptedBatchResumesWithContinueByteForByte() async throws {
        try await withServer { server in
            try await withFolder { folder in
                // The slow file holds at 30,000 bytes until gate "slow" opens, which the first
                // run never sees: it is interrupted however busy the machine is.
                let slow = server.url("/bytes/400000?chunk=10000&holdAt=30000&gate=slow").absoluteString
                let arguments = ["get", "-d", folder.path, "-j", "2", "--json", "--progress", "lines",
                                 server.url("/bytes/5000").absoluteString, slow, server.url("/gate/later").absoluteString]
                let process = try CurlqProcess(arguments)
                let part = folder.appendingPathComponent("400000.part")
                // Two chunks of the slow file on disk, and the gate asked for: so the small file is done.
                #expect(await waitForFile(part.path, atLeast: 20_000), "the slow download never started writing")
                try await server.waitForRequests(pathPrefix: "/gate/", count: 1)
                process.send(SIGINT)
                let interrupted = await process.finish()
                #expect(interrupted.status == 130, "\(interrupted)")
                #expect(!interrupted.killedBySignal)
                #expect(interrupted.stderr.contains("Interrupted (SIGINT)"), "\(interrupted.stderr)")
                #expect(interrupted.stderr.contains("Run the same command with -c to resume"))
                let kept = try #require(contents(part), "no .part kept: \(interrupted)")
                #expect(kept.count >= 20_000 && kept.count <= 30_000)
                #expect(kept == Array(FixtureServer.expectedBytes(count: kept.count)))
                #expect(!exists(folder.appendingPathComponent("400000")), "an incomplete file stands under its final name")
                #expect(files(in: folder) == ["400000.part", "5000"])
                let reports = try interrupted.jsonFiles()
                #expect(try interrupted.json()["interrupted"] as? Bool == true)
                #expect(reports.map { $0["error"] is NSNull } == [true, false, false])
                #expect(reports[1]["bytes"] as? Int == kept.count)

                server.openGate("later")
                server.openGate("slow")
                server.resetStatistics()
                var again = arguments
                again.insert("-c", at: 1)
                let resumed = try await curlq(again)
                #expect(resumed.status == 0, "\(resumed)")
                #expect(resumed.stderr.contains("(resumed: \(Format.bytes(Int64(400_000 - kept.count))) fetched)"), "\(resumed.stderr)")
                #expect(contents(folder.appendingPathComponent("400000")) == FixtureServer.expectedBytes(count: 400_000))
                #expect(contents(folder.appendingPathComponent("later")) == Array("open later".utf8))
                let ranges = server.requests.filter { $0.path == "/bytes/400000" }.map { $0.header("Range") }
                #expect(ranges == ["bytes=\(kept.count)-"], "\(ranges)")
                // A finished file is checked (HEAD: is it the size the server announces?), not fetched again.
                #expect(server.requests.filter { $0.path == "/bytes/5000" }.map(\.method) == ["HEAD"], "a finished file was fetched again")
                #expect(files(in: folder) == ["400000", "5000", "later"])
            }
        }
    }

    /// SIGKILL gives curlq no chance to clean up: whatever it leaves must be `.part` files only,
    /// and `-c` must finish every file byte for byte.
    @Test func aBatchKilledWithSIGKILLCompletesWithContinue() async throws {
        try await withServer { server in
            try await withFolder { folder in
                // Three files that pause at 30,000 bytes until gate "go" opens, two that finish.
                let held = (1...3).map { server.url("/bytes/\(200_000 + $0)?chunk=10000&holdAt=30000&gate=go").absoluteString }
                let quick = (1...2).map { server.url("/bytes/\(5_000 + $0)").absoluteString }
                let arguments = ["get", "-d", folder.path, "-j", "5", "--progress", "none"] + quick + held
                let process = try CurlqProcess(arguments)
                for index in 1...3 {
                    let part = folder.appendingPathComponent("\(200_000 + index).part")
                    #expect(await waitForFile(part.path, atLeast: 20_000), "\(part.lastPathComponent) never started")
                }
                // The two quick files are in place (renamed whole) before the kill, so that the
                // only .part files are the held ones: under ThreadSanitizer a quick file was
                // once still arriving when the held ones had reached 20,000 bytes.
                for index in 1...2 {
                    let done = folder.appendingPathComponent("\(5_000 + index)")
                    #expect(await waitForFile(done.path, atLeast: Int64(5_000 + index)), "\(done.lastPathComponent) never finished")
                }
                process.send(SIGKILL)
                let killed = await process.finish()
                #expect(killed.killedBySignal && killed.status == 128 + SIGKILL, "\(killed)")
                // Only complete files stand under final names; the held ones are .part files.
                for name in files(in: folder) where !name.hasSuffix(".part") {
                    let size = Int(name)!
                    #expect(contents(folder.appendingPathComponent(name)) == FixtureServer.expectedBytes(count: size), "\(name)")
                }
                #expect(files(in: folder).filter { $0.hasSuffix(".part") }.count == 3)

                server.openGate("go")
                server.resetStatistics()
                let resumed = try await curlq(["get", "-c", "-d", folder.path, "-j", "5", "--progress", "none"] + quick + held)
                #expect(resumed.status == 0, "\(resumed)")
                #expect(files(in: folder) == ["200001", "200002", "200003", "5001", "5002"])
                for name in files(in: folder) {
                    #expect(contents(folder.appendingPathComponent(name)) == FixtureServer.expectedBytes(count: Int(name)!), "\(name)")
                }
                // The held files resumed from their .part files, not from 0.
                let ranges = server.requests.filter { $0.path.hasPrefix("/bytes/2000") }.compactMap { $0.header("Range") }
                #expect(ranges.count == 3 && ranges.allSatisfy { $0.hasPrefix("bytes=") && !$0.hasPrefix("bytes=0-") }, "\(ranges)")
            }
        }
    }

    @Test func sigtermCancelsPrintsTheSummaryAndExits143() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let process = try CurlqProcess(["get", "-d", folder.path, "--progress", "bar", server.url("/gate/never").absoluteString])
                try await server.waitForRequests(pathPrefix: "/gate/", count: 1)
                process.send(SIGTERM)
                let run = await process.finish()
                #expect(run.status == 143, "\(run)")
                #expect(!run.killedBySignal)
                #expect(run.stderr.contains("Terminated (SIGTERM)"), "\(run.stderr)")
                #expect(run.stderr.contains(Terminal.showCursor), "the cursor was not shown again")
                #expect(files(in: folder).isEmpty)
            }
        }
    }

    // MARK: Retries and timeouts

    @Test func retriesShareOneBudgetForNetworkErrorsAndHTTPStatuses() async throws {
        try await withServer { server in
            try await withFolder { folder in
                func get(_ arguments: String...) async throws -> CurlqRun {
                    try await curlq(["get", "-d", folder.path, "--json", "--overwrite"] + arguments)
                }
                // Two 503s: 2 retries are enough, 1 is not.
                let enough = try await get("--retries", "2", server.url("/flaky/a?failures=2").absoluteString)
                #expect(enough.status == 0, "\(enough)")
                #expect(try enough.jsonFiles().first?["attempts"] as? Int == 3, "\(enough)")
                // A dropped connection (a network error) takes from the same budget.
                let dropped = try await get("--retries", "0", server.url("/flaky/b?failures=1&mode=close").absoluteString)
                #expect(dropped.status == 1)
                #expect(dropped.stderr.contains("CURLE_GOT_NOTHING"), "\(dropped.stderr)")
                let redone = try await get("--retries", "1", server.url("/flaky/b2?failures=1&mode=close").absoluteString)
                #expect(redone.status == 0, "\(redone)")
                #expect(try redone.jsonFiles().first?["attempts"] as? Int == 2)
                let short = try await get("--retries", "1", server.url("/flaky/c?failures=2").absoluteString)
                #expect(short.status == 1)
                #expect(server.hits("c") == 2)
                let report = try #require(try short.jsonFiles().first)
                #expect(report["status"] as? Int == 503 && report["attempts"] as? Int == 2)
                #expect((report["error"] as? String)?.contains("HTTP 503 Service Unavailable (after 2 attempts)") == true)

                // 500 is not retried by default, but is with --retry-http; none turns 503 off.
                #expect(try await get(server.url("/flaky/d?failures=1&status=500").absoluteString).status == 1)
                #expect(server.hits("d") == 1)
                #expect(try await get("--retry-http", "500", server.url("/flaky/e?failures=1&status=500").absoluteString).status == 0)
                #expect(server.hits("e") == 2)
                #expect(try await get("--retry-http", "none", server.url("/flaky/f?failures=1").absoluteString).status == 1)
                #expect(server.hits("f") == 1)

                // Retry-After is honoured.
                let waited = try await get("--progress", "lines", server.url("/flaky/g?failures=1&status=429&retryAfter=1").absoluteString)
                #expect(waited.status == 0, "\(waited)")
                #expect(try #require(try waited.jsonFiles().first?["seconds"] as? Double) >= 1)
                // 1 s asked, plus up to half of it at random (RetryPolicy's jitter).
                let wait = waited.stderr.firstMatch(of: /retry    g  attempt 2 of 6 in (\d+\.\d)s/).flatMap { Double($0.1) }
                #expect(wait.map { (1.0...1.5).contains($0) } == true, "\(waited.stderr)")
            }
        }
    }

    @Test func timeoutBoundsTheWholeFileRetriesIncluded() async throws {
        try await withServer { server in
            try await withFolder { folder in
                // 100 chunks, one every 100 ms: 10 s. With a 1 s limit per file, the 5 default
                // retries must not turn it into 6 s.
                let run = try await curlq("get", "-d", folder.path, "--max-file-time", "1", "--json",
                                          server.url("/bytes/100000?drip=100&chunk=1000").absoluteString)
                #expect(run.status == 1, "\(run)")
                let report = try #require(try run.jsonFiles().first)
                #expect((report["error"] as? String)?.contains("timed out") == true, "\(report)")
                #expect(try #require(report["seconds"] as? Double) < 2.5, "the retries ran past --max-file-time")
                #expect(!exists(folder.appendingPathComponent("100000")))
            }
        }
    }

    @Test func connectTimeoutBoundsTheConnection() async throws {
        try await withFolder { folder in
            // A listening socket whose backlog is full: the kernel leaves new connections hanging.
            var (listener, address) = try loopbackSocket(listening: true)
            defer { close(listener) }
            let length = socklen_t(MemoryLayout<sockaddr_in>.size)
            var fillers: [Int32] = []
            defer { fillers.forEach { close($0) } }
            for _ in 0..<3 {
                let filler = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
                fillers.append(filler)
                withUnsafePointer(to: &address) { pointer in
                    pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = connect(filler, $0, length) }
                }
            }
            let port = UInt16(bigEndian: address.sin_port)
            let run = try await curlq("get", "-d", folder.path, "--connect-timeout", "1", "--retries", "0",
                                      "http://127.0.0.1:\(port)/hangs")
            #expect(run.status == 1, "\(run)")
            #expect(run.stderr.contains("CURLE_OPERATION_TIMEDOUT"), "\(run.stderr)")
            #expect(run.seconds < 25, "the default 30 s connect timeout applied instead")
        }
    }

    // MARK: Concurrency and order

    @Test func jobsAndPerHostLimitConcurrency() async throws {
        try await withServer { server in
            try await withFolder { folder in
                // The first URL to a host answers at once: transfers to a host wait for its first
                // answer before opening more connections, and the delayed ones must overlap.
                let warmUp = server.url("/bytes/1").absoluteString
                let slow = (1...4).map { server.url("/bytes/1000?delay=300&n=\($0)").absoluteString }
                let two = try await curlq(["get", "-d", folder.appendingPathComponent("a").path, "-j", "2", warmUp] + slow)
                #expect(two.status == 0, "\(two)")
                #expect(server.peakConcurrency == 2)

                server.resetStatistics()
                let local = { (url: String) in url.replacingOccurrences(of: "127.0.0.1", with: "localhost") }
                let twoHosts = [warmUp, local(warmUp)] + slow[0...1] + slow[2...3].map(local)
                let perHost = try await curlq(["get", "-d", folder.appendingPathComponent("b").path, "-j", "4", "--per-host", "1"] + twoHosts)
                #expect(perHost.status == 0, "\(perHost)")
                #expect(server.peakConcurrency == 2, "one transfer per host, two hosts")

                // -j 0: five gated requests all in flight at once. Each goes to a server of its own,
                // as transfers to one host wait for its first answer before opening more connections.
                var servers: [FixtureServer] = []
                for _ in 0..<5 { servers.append(try await FixtureServer.start()) }
                let process = try CurlqProcess(["get", "-d", folder.appendingPathComponent("c").path, "-j", "0"]
                                               + servers.map { $0.url("/gate/all").absoluteString })
                for gated in servers { try await gated.waitForRequests(pathPrefix: "/gate/", count: 1) }
                for gated in servers { gated.openGate("all") }
                let unlimited = await process.finish()
                for gated in servers { try await gated.shutdown() }
                #expect(unlimited.status == 0, "\(unlimited)")
                #expect(files(in: folder.appendingPathComponent("c")) == ["all", "all.1", "all.2", "all.3", "all.4"])
            }
        }
    }

    @Test func orderAndPriorities() async throws {
        try await withServer { server in
            try await withFolder { folder in
                func startOrder(_ arguments: [String], input: String? = nil) async throws -> [String] {
                    server.resetStatistics()
                    let run = try await curlq(["get", "-j", "1", "--overwrite", "-d", folder.path] + arguments, input: input)
                    #expect(run.status == 0, "\(run)")
                    return server.requests.compactMap { $0.uri.split(separator: "n=").last.map(String.init) }
                }
                let urls = ["a", "b", "c", "d"].map { server.url("/bytes/10?n=\($0)").absoluteString }
                let plain = try await startOrder(urls)
                let fifo = try await startOrder(["--order", "fifo"] + urls)
                let lifo = try await startOrder(["--order", "lifo"] + urls)
                #expect(plain == ["a", "b", "c", "d"])
                #expect(fifo == ["a", "b", "c", "d"])
                #expect(lifo == ["d", "c", "b", "a"])
                let input = """
                    \(urls[0])
                      priority=low
                    \(urls[1])
                    \(urls[2])
                      priority=high
                    \(urls[3])
                    """
                let byPriority = try await startOrder(["-i", "-"], input: input)
                let byPriorityLIFO = try await startOrder(["-i", "-", "--order", "lifo"], input: input)
                #expect(byPriority == ["c", "b", "d", "a"])
                #expect(byPriorityLIFO == ["c", "d", "b", "a"])
            }
        }
    }

    // MARK: Headers, JSON, progress

    @Test func headersApplyToEveryURLAndHeaderLinesOverrideThem() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let input = """
                    \(server.url("/echo?1"))
                      out=one.json
                    \(server.url("/echo?2"))
                      out=two.json
                      header=x-b: own
                      header=X-C: 4
                      header=X-C: 5
                    """
                let run = try await curlq("get", "-i", "-", "-d", folder.path, "-H", "X-A: 1", "-H", "X-B:  2 ", input: input)
                #expect(run.status == 0, "\(run)")
                func headers(_ name: String) throws -> [[String]] {
                    let object = try JSONSerialization.jsonObject(with: Data(contentsOf: folder.appendingPathComponent(name)))
                    return ((object as? [String: Any])?["headers"] as? [[String]] ?? []).filter { $0.first?.hasPrefix("X-") == true || $0.first?.hasPrefix("x-") == true }
                }
                #expect(try headers("one.json") == [["X-A", "1"], ["X-B", "2"]])
                #expect(try headers("two.json") == [["X-A", "1"], ["x-b", "own"], ["X-C", "4"], ["X-C", "5"]])
            }
        }
    }

    /// `-H` fields stay with the origin they were given for: a redirect to another one gets none.
    @Test func headerFieldsDoNotFollowARedirectToAnotherOrigin() async throws {
        try await withServer { server in
            try await withServer { other in
                try await withFolder { folder in
                    let target = other.url("/bytes/20").absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                    let run = try await curlq("get", "-d", folder.path, "-H", "X-Api-Key: secret", "-H", "Accept: */*",
                                              server.url("/redirect?to=\(target)").absoluteString)
                    #expect(run.status == 0, "\(run)")
                    #expect(contents(folder.appendingPathComponent("redirect")) == FixtureServer.expectedBytes(count: 20))
                    #expect(server.requests.first?.header("X-Api-Key") == "secret")
                    #expect(other.requests.count == 1)
                    #expect(other.requests.first?.header("X-Api-Key") == nil)
                }
            }
        }
    }

    @Test func jsonReportShape() async throws {
        try await withServer { server in
            try await withFolder { folder in
                try Data("old".utf8).write(to: folder.appendingPathComponent("there"))
                let run = try await withRefusingPort { port in
                    let input = """
                        \(server.url("/bytes/1234"))
                        \(server.url("/status/404"))
                        http://127.0.0.1:\(port)/refused
                        \(server.url("/bytes/3"))
                          out=there
                        """
                    return try await curlq("get", "-i", "-", "-d", folder.path, "--json", "--retries", "0", "--progress", "lines", input: input)
                }
                #expect(run.status == 1, "\(run)")
                let object = try run.json()  // stdout holds the JSON alone
                #expect(object["downloaded"] as? Int == 1 && object["skipped"] as? Int == 1 && object["failed"] as? Int == 2)
                #expect(object["interrupted"] as? Bool == false)
                let reports = try run.jsonFiles()
                #expect(reports.count == 4)
                for report in reports {
                    #expect(Set(report.keys) == ["url", "path", "status", "bytes", "sha256", "attempts", "seconds", "error"])
                    #expect(report["seconds"] is Double || report["seconds"] is Int)
                }
                #expect(reports[0]["url"] as? String == server.url("/bytes/1234").absoluteString)
                #expect(reports[0]["path"] as? String == folder.appendingPathComponent("1234").standardizedFileURL.path)
                #expect(reports[0]["status"] as? Int == 200)
                #expect(reports[0]["bytes"] as? Int == 1234)
                #expect(reports[0]["sha256"] as? String == SHA256.hex(of: FixtureServer.expectedBytes(count: 1234)))
                #expect(reports[0]["attempts"] as? Int == 1)
                #expect(reports[0]["error"] is NSNull)
                #expect(reports[1]["status"] as? Int == 404)
                #expect(reports[1]["error"] as? String == "HTTP 404 Not Found")
                #expect(reports[1]["sha256"] is NSNull && reports[1]["bytes"] as? Int == 0)
                #expect(reports[2]["status"] is NSNull)
                #expect((reports[2]["error"] as? String)?.contains("CURLE_COULDNT_CONNECT") == true)
                #expect(reports[3]["status"] is NSNull && reports[3]["error"] is NSNull && reports[3]["bytes"] as? Int == 3)
            }
        }
    }

    @Test func progressModes() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let url = server.url("/flaky/p?failures=1&bytes=2000").absoluteString
                let lines = try await curlq("get", "-d", folder.appendingPathComponent("lines").path, url)  // auto, not a terminal
                #expect(lines.status == 0)
                let words = lines.stderr.split(separator: "\n").map { $0.split(separator: " ").first.map(String.init) ?? "" }
                #expect(Array(words.prefix(3)) == ["start", "retry", "done"], "\(lines.stderr)")
                #expect(!lines.stderr.contains("\u{1B}["), "escape codes on a non-terminal")

                let bar = try await curlq("get", "-d", folder.appendingPathComponent("bar").path, "--progress", "bar",
                                          server.url("/bytes/300000?drip=100&chunk=30000").absoluteString)  // 1 s: several frames
                #expect(bar.status == 0)
                #expect(bar.stderr.hasPrefix(Terminal.hideCursor), "\(bar.stderr.debugDescription)")
                #expect(bar.stderr.contains(Terminal.showCursor))
                #expect(bar.stderr.contains("300000   ["), "no bar for the file")
                #expect(bar.stderr.contains("0 of 1 files"), "no overall line")
                #expect(bar.stderr.contains("✓ 300000  293 KiB in"), "the finished file is not listed")

                let none = try await curlq("get", "-d", folder.appendingPathComponent("none").path, "--progress", "none", url)
                #expect(none.status == 0)
                #expect(none.stderr.hasPrefix("Done in"), "\(none.stderr)")
            }
        }
    }

    // MARK: Demo and memory

    @Test func theDemoRunsOnItsOwnAndChecksItself() async throws {
        let run = try await curlq("demo", "--progress", "lines")
        #expect(run.status == 0, "\(run)")
        #expect(run.stderr.contains("All as expected."))
        #expect(run.stderr.contains("Range: bytes="))
        #expect(run.stderr.contains("--order lifo: started e d c b a"))
        #expect(run.seconds < 60)
    }

    @Test(.disabled(if: underSanitizer, "a sanitizer's shadow memory makes RSS meaningless"))
    func memoryStaysFlatForManyFilesAndForABigOne() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let many = (0..<10_000).map { "\(server.url("/bytes/100?n=\($0)"))\n  out=f\($0)\n" }.joined()
                let small = try await curlq("get", "-i", "-", "-d", folder.appendingPathComponent("many").path, "-j", "16",
                                            "--progress", "none", input: many)
                #expect(small.status == 0, "\(small.stderr.prefix(2000))")
                #expect(files(in: folder.appendingPathComponent("many")).count == 10_000)
                #expect(small.peakMemoryKiB < 64 * 1024, "peak \(small.peakMemoryKiB) KiB for 10,000 files")

                let big = try await curlq("get", "-d", folder.appendingPathComponent("big").path, "--progress", "none",
                                          server.url("/bytes/1073741824?chunk=1048576").absoluteString)
                #expect(big.status == 0, "\(big)")
                let size = try FileManager.default.attributesOfItem(atPath: folder.appendingPathComponent("big/1073741824").path)[.size] as? NSNumber
                #expect(size?.int64Value == 1 << 30)
                #expect(big.peakMemoryKiB < 64 * 1024, "peak \(big.peakMemoryKiB) KiB for a 1 GiB file")
            }
        }
    }
}

// MARK: - Traps that lose time or data (issue 22)

@Suite struct CurlqTrapTests {
    /// A `.part` that carries the validator the engine kept with it is resumed without `-c`
    /// (If-Range sent, so a changed file comes whole); `--restart` starts over and says so.
    @Test func aValidatedPartIsResumedByDefaultAndRestartStartsOver() async throws {
        try await withServer { server in
            try await withFolder { folder in
                // Version 1 of each file breaks after 60,000 bytes; with no retries that leaves a
                // .part holding the validator "v1". Every later request gets a newer version.
                for id in ["kept", "redone"] {
                    let url = server.url("/versioned/\(id)?bytes=200000&closeFirst=60000").absoluteString
                    let broken = try await curlq("get", "--retries", "0", "-d", folder.path, url)
                    #expect(broken.status == 1, "\(broken)")
                    let part = folder.appendingPathComponent("\(id).part").path
                    #expect(FileKind.size(part) == 60_000)
                    #expect(FileKind.hasPartValidator(part), "the engine kept no validator with \(part)")
                }

                // No -c: resumed, with If-Range; version 2 differs, so it comes whole and right.
                let resumed = try await curlq("get", "--progress", "lines", "-d", folder.path,
                                              server.url("/versioned/kept?bytes=200000").absoluteString)
                #expect(resumed.status == 0, "\(resumed)")
                #expect(resumed.stderr.contains("(resuming after 58.6 KiB)"), "\(resumed.stderr)")
                let request = try #require(server.requests.last)
                #expect(request.header("Range") == "bytes=60000-" && request.header("If-Range") == "\"v1\"")
                #expect(contents(folder.appendingPathComponent("kept")) == FixtureServer.expectedBytes(offset: 1, count: 200_000))

                // --restart: no Range, and the start line says why.
                let restarted = try await curlq("get", "--restart", "--progress", "lines", "-d", folder.path,
                                                server.url("/versioned/redone?bytes=200000").absoluteString)
                #expect(restarted.status == 0, "\(restarted)")
                #expect(restarted.stderr.contains("(starting over (--restart): discarding 58.6 KiB of .part)"), "\(restarted.stderr)")
                #expect(server.requests.last?.header("Range") == nil)
                #expect(contents(folder.appendingPathComponent("redone")) == FixtureServer.expectedBytes(offset: 1, count: 200_000))

                let both = try await curlq("get", "-c", "--restart", "-d", folder.path, server.url("/bytes/10").absoluteString)
                #expect(both.status == 2 && both.stderr.contains("contradict"), "\(both)")
            }
        }
    }

    /// A `.part` without a validator is not trusted without `-c`: it starts over, saying so.
    @Test func aPartWithoutValidatorStartsOverAndSaysSo() async throws {
        try await withServer { server in
            try await withFolder { folder in
                try Data(repeating: 0xAA, count: 50_000).write(to: folder.appendingPathComponent("80000.part"))
                let run = try await curlq("get", "--progress", "lines", "-d", folder.path, server.url("/bytes/80000").absoluteString)
                #expect(run.status == 0, "\(run)")
                #expect(run.stderr.contains("(starting over: the 48.8 KiB .part has no validator from an earlier curlq run; -c resumes it anyway)"),
                        "\(run.stderr)")
                #expect(server.requests.last?.header("Range") == nil)
                #expect(contents(folder.appendingPathComponent("80000")) == FixtureServer.expectedBytes(count: 80_000))
            }
        }
    }

    /// `-o` names the file for one URL, as curl's does (relative to -d); `-d` is the folder;
    /// `-O` is accepted from habit. The old `-o DIR` is refused rather than made a file.
    @Test func dashOIsTheFileAndDashDTheFolder() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let url = server.url("/bytes/3000").absoluteString
                let named = try await curlq("get", "-O", "-o", "myfile.bin", url, in: folder)
                #expect(named.status == 0, "\(named)")
                #expect(files(in: folder) == ["myfile.bin"])
                #expect(contents(folder.appendingPathComponent("myfile.bin")) == FixtureServer.expectedBytes(count: 3000))

                let nested = try await curlq("get", "-d", folder.path, "-o", "sub/other.bin", url)
                #expect(nested.status == 0, "\(nested)")
                #expect(contents(folder.appendingPathComponent("sub/other.bin")) == FixtureServer.expectedBytes(count: 3000))

                let before = server.requests.count
                let two = try await curlq("get", "-o", folder.appendingPathComponent("x").path, url, url)
                #expect(two.status == 2 && two.stderr.contains("-o names the file for one URL"), "\(two)")
                let intoFolder = try await curlq("get", "-o", folder.path, url)
                #expect(intoFolder.status == 2 && intoFolder.stderr.contains("use -d"), "\(intoFolder)")
                #expect(server.requests.count == before)
                #expect(files(in: folder) == ["myfile.bin", "sub"])
            }
        }
    }

    /// A private CA is trusted with --cacert or curl's variables; -k works with a warning on
    /// every run and still checks a pinned key.
    @Test func tlsTrustOptionsAndVariables() async throws {
        let server = try await NginxServer.start()
        defer { server.shutdown() }
        try await withFolder { folder in
            let url = server.url("/files/1k").absoluteString
            let body = FixtureServer.expectedBytes(count: 1024)
            func run(_ arguments: [String], _ environment: [String: String] = [:]) async throws -> CurlqRun {
                try? FileManager.default.removeItem(at: folder.appendingPathComponent("1k"))
                // The variables of this process are not to count: only the ones a case sets.
                let unset = ["CURL_CA_BUNDLE": "", "SSL_CERT_FILE": "", "SSL_CERT_DIR": ""]
                return try await CurlqProcess(["get", "--retries", "0", "-d", folder.path] + arguments + [url],
                                              environment: unset.merging(environment) { $1 }).finish()
            }
            let untrusted = try await run([])
            #expect(untrusted.status == 1, "\(untrusted)")
            for (arguments, environment) in [
                (["--cacert", server.caFile], [String: String]()),
                ([], ["CURL_CA_BUNDLE": server.caFile]),
                ([], ["SSL_CERT_FILE": server.caFile]),
                (["--cacert", server.caFile, "--pinnedpubkey", server.publicKeyPin], [:]),
            ] {
                let trusted = try await run(arguments, environment)
                #expect(trusted.status == 0, "\(arguments) \(environment): \(trusted)")
                #expect(contents(folder.appendingPathComponent("1k")) == body)
                #expect(!trusted.stderr.contains("insecure"))
            }
            let insecure = try await run(["-k"])
            #expect(insecure.status == 0 && insecure.stderr.contains("warning: -k/--insecure"), "\(insecure)")
            let wrongPin = try await run(["-k", "--pinnedpubkey", "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="])
            #expect(wrongPin.status == 1, "\(wrongPin)")
            let missing = try await run([], ["CURL_CA_BUNDLE": folder.appendingPathComponent("none.pem").path])
            #expect(missing.status == 2 && missing.stderr.contains("$CURL_CA_BUNDLE: cannot read the CA file"), "\(missing)")
        }
    }

    /// A server that goes silent mid-body fails the attempt after --stall-timeout (on by
    /// default), and the stall is retried like a network error; --max-file-time is the
    /// whole-file limit, named so that it is not mistaken for a stall limit.
    @Test func aStallFailsEachAttemptAndIsRetried() async throws {
        try await withServer { server in
            try await withFolder { folder in
                // Every request sends 30,000 of 100,000 bytes, then nothing, connection open.
                let run = try await curlq("get", "-d", folder.path, "--stall-timeout", "2", "--retries", "1", "--json",
                                          "--progress", "lines", server.url("/bytes/100000?stallAfter=30000").absoluteString)
                #expect(run.status == 1, "\(run)")
                let report = try #require(try run.jsonFiles().first)
                #expect(report["attempts"] as? Int == 2, "\(report)")
                #expect(run.stderr.contains("retry    100000  attempt 2 of 2"), "\(run.stderr)")
                // Functional bound: two 2 s stalls and a backoff, far below the 60 s default.
                #expect(try #require(report["seconds"] as? Double) < 30, "\(report)")
                #expect(!exists(folder.appendingPathComponent("100000")))
                // Not asserted: that the server recorded both requests. On a loaded machine the
                // fixture once read the second head after the client had given up on it.
            }
        }
    }

    /// Input files that are not regular files: a FIFO (what `<(cmd)` gives), /dev/stdin and
    /// /dev/null are read like any file.
    @Test func inputFromAFIFODevStdinAndDevNull() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let fifo = folder.appendingPathComponent("urls.fifo").path
                #expect(mkfifo(fifo, 0o600) == 0)
                let url = server.url("/bytes/300").absoluteString
                // The writer blocks in open until curlq opens the FIFO for reading: that is its event.
                let writer = Thread {
                    let descriptor = open(fifo, O_WRONLY | O_CLOEXEC)
                    guard descriptor >= 0 else { return }
                    Output.write(url + "\n", to: descriptor)
                    close(descriptor)
                }
                writer.start()
                let fromFIFO = try await curlq("get", "-d", folder.appendingPathComponent("a").path, "-i", fifo)
                #expect(fromFIFO.status == 0, "\(fromFIFO)")
                #expect(contents(folder.appendingPathComponent("a/300")) == FixtureServer.expectedBytes(count: 300))

                let fromStdin = try await curlq("get", "-d", folder.appendingPathComponent("b").path, "-i", "/dev/stdin",
                                                input: url + "\n")
                #expect(fromStdin.status == 0, "\(fromStdin)")
                #expect(contents(folder.appendingPathComponent("b/300")) == FixtureServer.expectedBytes(count: 300))

                let empty = try await curlq("get", "-d", folder.appendingPathComponent("c").path, "-i", "/dev/null", url)
                #expect(empty.status == 0, "\(empty)")
                #expect(contents(folder.appendingPathComponent("c/300")) == FixtureServer.expectedBytes(count: 300))

                let missing = try await curlq("get", "-i", folder.appendingPathComponent("nothing-here").path)
                #expect(missing.status == 2 && missing.stderr.contains("No such file or directory"), "\(missing)")
            }
        }
    }
}
