@testable import curlq
import CurlQueueDownloads
import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// Mirrors in curlq's input file: a line of TAB-separated URLs for one file, the next tried when
/// one fails in a way another server could fix; a `.part` resumed on another mirror only when
/// a checksum can judge the result; credentials only for their own origin.
@Suite struct CurlqMirrorTests {
    func get(_ folder: URL, _ input: String, _ arguments: String...) async throws -> CurlqRun {
        try await curlq(["get", "-d", folder.path, "--json", "--progress", "lines", "-i", "-"] + arguments, input: input)
    }

    func mirrors(_ report: [String: Any]) throws -> (served: String?, failed: [[String: Any]]) {
        let mirrors = try #require(report["mirrors"] as? [String: Any], "no mirrors in \(report)")
        return (mirrors["served"] as? String, try #require(mirrors["failed"] as? [[String: Any]]))
    }

    @Test func theInputFormatTakesTabSeparatedMirrorsAndKeepsTheOldOne() throws {
        let entries = try InputFile.parse(Data("""
            https://a.example.org/x.iso\thttps://b.example.net/pub/x.iso\t\thttp://c.example.com/x.iso
                sha256=\(String(repeating: "ab", count: 32))
            https://example.org/one
            """.utf8), origin: "urls.txt")
        #expect(entries.count == 2)
        #expect(entries[0].url.absoluteString == "https://a.example.org/x.iso")
        #expect(entries[0].mirrors.map(\.absoluteString) == ["https://b.example.net/pub/x.iso", "http://c.example.com/x.iso"])
        #expect(entries[0].checksum != nil)
        #expect(entries[1].mirrors.isEmpty)
        #expect(throws: InputFileError(line: 1, message: "the same URL is given twice on one line: 'https://a.example.org/x'")) {
            try InputFile.parse(Data("https://a.example.org/x\thttps://a.example.org/x".utf8), origin: "u")
        }
        #expect(throws: InputFileError(line: 1, message: "mirror 2: only http and https URLs are supported: 'ftp://b/x'")) {
            try InputFile.parse(Data("https://a.example.org/x\tftp://b/x".utf8), origin: "u")
        }
        // The name comes from the first URL.
        let jobs = BatchPlanner.plan(entries, options: BatchOptions(directory: URL(fileURLWithPath: "/nonexistent-curlq-test")))
        #expect(jobs[0].name == "x.iso" && jobs[0].mirrors.count == 2)
    }

    @Test func aMirrorServesWhenTheFirstRefusesConnectionsStallsAnswers503Or404() async throws {
        try await withServer { server in
            try await withRefusingPort { port in
                try await withFolder { folder in
                    let input = """
                        http://127.0.0.1:\(port)/refused.bin\t\(server.url("/bytes/30000?m=1"))
                        \(server.url("/status/503"))\t\(server.url("/bytes/30001?m=2"))
                            out=busy.bin
                        \(server.url("/status/404"))\t\(server.url("/bytes/30002?m=3"))
                            out=missing.bin
                        """
                    // --retries 0: a budget of one try, but every mirror gets one.
                    let run = try await get(folder, input, "--retries", "0")
                    #expect(run.status == 0, "\(run)")
                    #expect(holds(folder.appendingPathComponent("refused.bin"), 30000))
                    #expect(holds(folder.appendingPathComponent("busy.bin"), 30001))
                    #expect(holds(folder.appendingPathComponent("missing.bin"), 30002))
                    let reports = try run.jsonFiles()
                    let expected: [(String, String, Int?)] = [("/bytes/30000?m=1", "connect", nil), ("/bytes/30001?m=2", "http", 503),
                                                              ("/bytes/30002?m=3", "http", 404)]
                    #expect(reports.count == expected.count)
                    for (report, (served, kind, status)) in zip(reports, expected) {
                        #expect(report["outcome"] as? String == "downloaded", "\(report)")
                        let (by, failed) = try mirrors(report)
                        #expect(by == server.url(served).absoluteString)
                        #expect(failed.count == 1 && failed[0]["errorKind"] as? String == kind && failed[0]["status"] as? Int == status,
                                "\(failed)")
                        #expect(report["attempts"] as? Int == 2)
                    }
                    #expect(run.stderr.contains("from mirror 2 of 2 (\(server.url("/bytes/30001?m=2")))"), "\(run.stderr)")
                    #expect(run.stderr.contains("HTTP 503 Service Unavailable from mirror 1 of 2 (\(server.url("/status/503"))); next: mirror 2 of 2"),
                            "\(run.stderr)")
                    // A stall goes to the next mirror too. A budget of 4 tries and 2 s: the test
                    // process's own server may stall a second on a loaded machine.
                    let stalled = try await get(folder, "\(server.url("/bytes/30003?stallAfter=1000"))\t\(server.url("/bytes/30003?m=4"))\n",
                                                "--retries", "3", "--stall-timeout", "2")
                    #expect(stalled.status == 0, "\(stalled)")
                    #expect(holds(folder.appendingPathComponent("30003"), 30003))
                    let (by, failed) = try mirrors(try #require(try stalled.jsonFiles().first))
                    #expect(by == server.url("/bytes/30003?m=4").absoluteString)
                    #expect(failed.first?["errorKind"] as? String == "stall", "\(failed)")
                    // A URL on the command line is a file of its own (curl's convention), mirrors or not.
                    let two = try await curlq("get", "-d", folder.path, "--json", server.url("/bytes/10?a=1").absoluteString,
                                              server.url("/bytes/11?b=1").absoluteString)
                    #expect(try two.jsonFiles().count == 2)
                }
            }
        }
    }

    @Test func whenEveryMirrorFailsOneFailureNamesEachAndARefusedRequestDoesNotSwitch() async throws {
        try await withServer { server in
            try await withRefusingPort { port in
                try await withFolder { folder in
                    let refused = "http://127.0.0.1:\(port)/x"
                    let input = """
                        \(server.url("/status/404?n=1"))\t\(server.url("/status/410"))\t\(refused)
                            out=gone.bin
                        \(server.url("/status/403"))\t\(server.url("/bytes/100?never=1"))
                            out=forbidden.bin
                        """
                    let run = try await get(folder, input, "--retries", "0")
                    #expect(run.status == 1, "\(run)")
                    let reports = try run.jsonFiles()
                    let error = try #require(reports[0]["error"] as? String)
                    #expect(error.hasPrefix("no mirror could serve it (3 tries): "), "\(error)")
                    #expect(error.contains("\(server.url("/status/404?n=1")): HTTP 404 Not Found"))
                    #expect(error.contains("\(server.url("/status/410")): HTTP 410 Gone"))
                    #expect(error.contains("\(refused): could not connect"))
                    #expect(run.stderr.contains("failed   gone.bin  no mirror could serve it (3 tries)"), "\(run.stderr)")
                    let (served, failed) = try mirrors(reports[0])
                    #expect(served == nil)
                    #expect(failed.map { $0["url"] as? String } == [server.url("/status/404?n=1"), server.url("/status/410"),
                                                                   URL(string: refused)!].map(\.absoluteString))
                    #expect(!exists(folder.appendingPathComponent("gone.bin")))
                    // 403 says the request is refused: another mirror would refuse it too.
                    #expect((reports[1]["error"] as? String)?.contains("HTTP 403 Forbidden from mirror 1 of 2") == true, "\(reports[1])")
                    #expect(!server.requests.contains { $0.uri.contains("never=1") })
                    // With a budget, the list is gone round again.
                    let again = try await get(folder, "\(server.url("/status/404?n=2"))\t\(refused)\n    out=round.bin\n", "--retries", "3")
                    #expect(again.status == 1)
                    #expect(try again.jsonFiles()[0]["attempts"] as? Int == 4)
                    #expect(server.requests.filter { $0.uri.contains("n=2") }.count == 2)
                }
            }
        }
    }

    @Test func maxFileTimeAndCtrlCEndAFileWaitingBetweenTwoRounds() async throws {
        try await withServer { server in
            try await withFolder { folder in
                // Two mirrors that always fail, and a budget of 40 tries: the backoff between
                // rounds doubles to 30 s, so only the limits can end the file early.
                let input = "\(server.url("/status/503?w=1"))\t\(server.url("/status/404?w=2"))\n    out=w.bin\n"
                let timed = try await get(folder, input, "--retries", "39", "--max-file-time", "2")
                #expect(timed.status == 1, "\(timed)")
                let report = try #require(try timed.jsonFiles().first)
                #expect(report["errorKind"] as? String == "timeout", "\(report)")
                #expect(try #require(report["seconds"] as? Double) < 10, "--max-file-time did not end the wait between mirrors")

                let process = try CurlqProcess(["get", "-d", folder.path, "--json", "--progress", "lines", "--retries", "39", "-i", "-"],
                                               input: Data(input.utf8))
                // The event: the ninth try is announced, at the start of a wait of 1 to 2 s.
                #expect(await process.waitForError(containing: "(attempt 9 of 40)"))
                process.send(SIGINT)
                let stopped = await process.finish(timeout: 30)
                #expect(stopped.status == 130, "\(stopped)")
                #expect(try stopped.jsonFiles().first?["outcome"] as? String == "interrupted")
            }
        }
    }

    @Test func aChecksumMismatchFromOneMirrorLetsTheNextOnesBytesWin() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let right = SHA256.hex(of: FixtureServer.expectedBytes(count: 20000))
                let input = """
                    \(server.url("/bytes/20001"))\t\(server.url("/bytes/20000"))
                        out=file.bin
                        sha256=\(right)
                    """
                let run = try await get(folder, input, "--retries", "0")
                #expect(run.status == 0, "\(run)")
                #expect(holds(folder.appendingPathComponent("file.bin"), 20000))
                let report = try #require(try run.jsonFiles().first)
                #expect(report["sha256"] as? String == right)
                let (served, failed) = try mirrors(report)
                #expect(served == server.url("/bytes/20000").absoluteString)
                #expect(failed.count == 1 && failed[0]["errorKind"] as? String == "checksum", "\(failed)")
                #expect(files(in: folder) == ["file.bin"], "no .unverified or .part left")
            }
        }
    }

    @Test func aPartFromOneMirrorIsResumedOnAnotherOnlyWithAChecksum() async throws {
        try await withServer { server in
            try await withFolder { folder in
                // Both mirrors give the same ETag: If-Range alone would let the second splice its
                // bytes onto the first's.
                let cut = "/bytes/100000?etag=same&closeAfter=40000"
                let whole = "/bytes/100000?etag=same"
                let plain = try await get(folder, "\(server.url(cut + "&f=1"))\t\(server.url(whole + "&f=1"))\n    out=plain.bin\n",
                                          "--retries", "0")
                #expect(plain.status == 0, "\(plain)")
                #expect(plain.stderr.contains("plain.bin: starting over on mirror 2 of 2"), "\(plain.stderr)")
                let second = try #require(server.requests.last { $0.uri == server.url(whole + "&f=1").relativeReference })
                #expect(second.header("range") == nil, "resumed from another mirror without a check: \(second.headers)")
                #expect(holds(folder.appendingPathComponent("plain.bin"), 100000))

                let right = SHA256.hex(of: FixtureServer.expectedBytes(count: 100000))
                let checked = try await get(folder, """
                    \(server.url(cut + "&f=2"))\t\(server.url(whole + "&f=2"))
                        out=checked.bin
                        sha256=\(right)
                    """, "--retries", "0")
                #expect(checked.status == 0, "\(checked)")
                #expect(checked.stderr.contains("checked.bin: resuming the"), "\(checked.stderr)")
                let resumed = try #require(server.requests.last { $0.uri == server.url(whole + "&f=2").relativeReference })
                #expect(resumed.header("range") == "bytes=40000-", "\(resumed.headers)")
                #expect(resumed.header("if-range") == nil, "the first mirror's validator went to the second")
                #expect(try checked.jsonFiles()[0]["outcome"] as? String == "resumed")
                #expect(holds(folder.appendingPathComponent("checked.bin"), 100000))

                // A rerun knows which mirror wrote a .part (its mark, user.curlq.source): the
                // second mirror's .part is not resumed on the first, whose ETag is the same.
                let both = "\(server.url(cut + "&f=3"))\t\(server.url(cut + "&g=3"))\n    out=rerun.bin\n"
                let failed = try await get(folder, both, "--retries", "0")
                #expect(failed.status == 1, "\(failed)")
                let rerun = try await get(folder, both, "--retries", "0")
                #expect(rerun.stderr.contains("rerun.bin: starting over on mirror 1 of 2"), "\(rerun.stderr)")
                #expect(rerun.stderr.contains(".part came from mirror 2 of 2"), "\(rerun.stderr)")
                #expect(!rerun.stderr.contains("resuming after"), "the start line says it resumes: \(rerun.stderr)")
                let first = try #require(server.requests.last { $0.uri == server.url(cut + "&f=3").relativeReference })
                #expect(first.header("range") == nil, "the second mirror's .part resumed on the first: \(first.headers)")
            }
        }
    }

    @Test func credentialsGoOnlyToTheirOwnOrigin() async throws {
        try await withServer { first in
            try await withServer { other in
                try await withFolder { folder in
                    let input = """
                        \(first.url("/status/503?c=1"))\t\(other.url("/bytes/100?c=2"))
                            out=c.bin
                            header=Cookie: session=s3cr3t
                        """
                    let run = try await get(folder, input, "--retries", "0", "-u", "user:pw")
                    #expect(run.status == 0, "\(run)")
                    let asked = try #require(first.requests.last { $0.uri.contains("c=1") })
                    #expect(asked.header("authorization") != nil && asked.header("cookie") == "session=s3cr3t")
                    let served = try #require(other.requests.last { $0.uri.contains("c=2") })
                    #expect(served.header("authorization") == nil && served.header("cookie") == nil, "\(served.headers)")
                }
            }
        }
    }
}

/// Whether the file at `url` holds exactly the fixture's first `count` bytes (said without
/// printing them all when it does not).
private func holds(_ url: URL, _ count: Int) -> Bool {
    contents(url) == FixtureServer.expectedBytes(count: count)
}

extension URL {
    /// The path and query, as a server's request line has them.
    fileprivate var relativeReference: String { path + (query.map { "?" + $0 } ?? "") }
}
