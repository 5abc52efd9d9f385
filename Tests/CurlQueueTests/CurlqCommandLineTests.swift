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

/// curlq as a command: help and usage errors, where files go, the input it reads, what it shows
/// on standard output and error, its exit statuses, the demo.
@Suite struct CurlqCommandLineTests {
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
                       "--connect-timeout", "--continue", "--overwrite", "--header", "--json", "--quiet", "--progress",
                       "--location", "--fail", "--remote-time", "--checksum", "--on-download-complete"] {
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
                    (["get", "--bogus", good], "unknown option '--bogus'"),
                    (["get", "-j", "many", good], "'many' is invalid"),
                    (["get", "-j", "-1", good], "--jobs must be 0 (no limit) or more, not -1"),
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
                #expect(run.stderr.contains("nothing-listens: could not connect"), "\(run.stderr)")
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
                    #expect(Set(report.keys).isSuperset(of: ["url", "outcome", "status", "bytes", "sha256", "attempts", "seconds", "error"]))
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
                #expect((reports[2]["error"] as? String)?.contains("could not connect") == true)
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

    @Test func theDemoRunsOnItsOwnAndChecksItself() async throws {
        let run = try await curlq("demo", "--progress", "lines")
        #expect(run.status == 0, "\(run)")
        #expect(run.stderr.contains("All as expected."))
        #expect(run.stderr.contains("Range: bytes="))
        #expect(run.stderr.contains("--order lifo: started e d c b a"))
        #expect(run.seconds < 60)
    }
}
