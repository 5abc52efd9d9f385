@testable import curlq
import CurlQueueDownloads
import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// `curlq get -J`: files named as their server's `Content-Disposition` says, once complete and
/// verified, made safe as URL names are, in the output folder only, never replacing a file.
@Suite struct CurlqRemoteHeaderNameTests {
    /// `/bytes/COUNT` answering with `Content-Disposition: field` (and `extra` query parameters).
    static func url(_ server: FixtureServer, _ count: Int, _ field: String, _ extra: String = "") -> String {
        var allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        allowed.insert(charactersIn: "-_")
        return server.baseURL + "/bytes/\(count)?cd=" + field.addingPercentEncoding(withAllowedCharacters: allowed)! + extra
    }

    @Test func theServersNameWithFilenameStarWinningAndTheURLsNameWithoutJ() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let plain = Self.url(server, 100, "attachment; filename=\"report 2024.pdf\"")
                let both = Self.url(server, 200, "attachment; filename=\"EURO rates\"; filename*=UTF-8''%e2%82%ac%20rates.csv")
                let none = Self.url(server, 300, "inline")
                let run = try await curlq("get", "-J", "--json", "--progress", "lines", "-d", folder.path, plain, both, none)
                #expect(run.status == 0, "\(run)")
                #expect(files(in: folder) == ["300", "report 2024.pdf", "€ rates.csv"])
                #expect(contents(folder.appendingPathComponent("report 2024.pdf")) == FixtureServer.expectedBytes(count: 100))
                #expect(contents(folder.appendingPathComponent("€ rates.csv")) == FixtureServer.expectedBytes(count: 200))
                #expect(run.stderr.contains("saved as report 2024.pdf (the server's name, -J)"), "\(run.stderr)")
                let reports = try run.jsonFiles()
                #expect(reports[0]["path"] as? String == folder.appendingPathComponent("report 2024.pdf").path)
                #expect(reports[0]["nameFromServer"] as? Bool == true)
                #expect(reports[0]["bytes"] as? Int == 100)
                #expect(reports[1]["path"] as? String == folder.appendingPathComponent("€ rates.csv").path)
                #expect(reports[2]["path"] as? String == folder.appendingPathComponent("300").path)
                #expect(reports[2]["nameFromServer"] == nil)
            }
            try await withFolder { folder in
                let run = try await curlq("get", "-d", folder.path, Self.url(server, 100, "attachment; filename=report.pdf"))
                #expect(run.status == 0, "\(run)")
                #expect(files(in: folder) == ["100"], "without -J the URL's name stays")
            }
        }
    }

    /// `-o` (and `out=`) name the file: -J is ignored for it, as curl does.
    @Test func aNameGivenWithOOrOutWins() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let named = try await curlq("get", "-J", "-d", folder.path, "-o", "mine.bin", Self.url(server, 100, "attachment; filename=theirs.bin"))
                #expect(named.status == 0, "\(named)")
                let input = "\(Self.url(server, 200, "attachment; filename=theirs.bin"))\n  out=also-mine.bin\n"
                let listed = try await curlq("get", "-J", "-d", folder.path, "-i", "-", input: input)
                #expect(listed.status == 0, "\(listed)")
                #expect(files(in: folder) == ["also-mine.bin", "mine.bin"])
            }
        }
    }

    /// Hostile fields: a safe base name in the folder, or the URL's name; nothing outside.
    @Test func hostileNamesStayInTheFolder() async throws {
        try await withServer { server in
            try await withFolder { parent in
                let folder = parent.appendingPathComponent("downloads")
                let cases: [(Int, String)] = [
                    (11, "attachment; filename=\"../../etc/passwd\""),
                    (12, "attachment; filename=\"/abs\""),
                    (13, "attachment; filename*=UTF-8''%2e%2e%2fx"),
                    (14, "attachment; filename*=UTF-8''a%00b%0Ac%1B.txt"),
                    (15, "attachment; filename=\"\(String(repeating: "n", count: 10_240)).bin\""),
                    (16, "attachment; filename=\"\""),
                    (17, "attachment; filename=."),
                    (18, "attachment; filename=.."),
                    (19, "attachment; filename=\"..\\\\..\\\\win.ini\""),
                    (20, "attachment; filename=.bashrc"),
                    (21, "attachment; filename*=UTF-8''%2e%2e%2f%2e%2e%2f"),
                ]
                let run = try await curlq(["get", "-J", "-d", folder.path] + cases.map { Self.url(server, $0.0, $0.1) })
                #expect(run.status == 0, "\(run)")
                #expect(files(in: parent) == ["downloads"], "something was written outside the folder")
                let long = String(repeating: "n", count: SafeFileName.maxBytes - 4) + ".bin"
                #expect(files(in: folder) == ["16", "17", "18", "21", "a_b_c_.txt", "abs", "bashrc", long, "passwd", "win.ini", "x"].sorted())
                #expect(contents(folder.appendingPathComponent("passwd")) == FixtureServer.expectedBytes(count: 11))
                #expect(contents(folder.appendingPathComponent(long)) == FixtureServer.expectedBytes(count: 15))
            }
        }
    }

    /// A file already there under the server's name is never replaced, not even with
    /// --overwrite: that file fails, and the download stays, whole, under the URL's name.
    @Test func aFileAlreadyThereIsNeverReplaced() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let mine = folder.appendingPathComponent("report.pdf")
                try Data("mine".utf8).write(to: mine)
                let url = Self.url(server, 100, "attachment; filename=report.pdf")
                let run = try await curlq("get", "-J", "--json", "--overwrite", "--progress", "lines", "-d", folder.path, url)
                #expect(run.status == 1, "\(run)")
                #expect(contents(mine) == Array("mine".utf8))
                #expect(contents(folder.appendingPathComponent("100")) == FixtureServer.expectedBytes(count: 100))
                #expect(run.stderr.contains("the server names it report.pdf, which is already there with other bytes (-J never replaces a file); the download is kept as 100"),
                        "\(run.stderr)")
                let report = try #require(try run.jsonFiles().first)
                #expect(report["outcome"] as? String == "failed")
                #expect(report["errorKind"] as? String == "existing-file")
                #expect(report["path"] as? String == folder.appendingPathComponent("100").path)
                #expect(report["nameFromServer"] == nil)

                // With a checksum: verified under NAME.unverified, then kept under the URL's name.
                let sha = SHA256.hex(of: FixtureServer.expectedBytes(count: 200))
                let input = "\(Self.url(server, 200, "attachment; filename=report.pdf"))\n  sha256=\(sha)\n"
                let checked = try await curlq("get", "-J", "-d", folder.path, "-i", "-", input: input)
                #expect(checked.status == 1, "\(checked)")
                #expect(contents(mine) == Array("mine".utf8))
                #expect(files(in: folder) == ["100", "200", "report.pdf"])
            }
        }
    }

    /// The same -J command run again (issue 36): the file already under the server's name holds
    /// the bytes downloaded again, so it is already there: exit 0, no duplicate under the URL's name.
    @Test func aRunAgainFindsTheFileAlreadyThere() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let url = Self.url(server, 1000, "attachment; filename=report.pdf")
                let arguments = ["get", "-J", "--json", "--progress", "lines", "-d", folder.path, url]
                let first = try await curlq(arguments)
                #expect(first.status == 0, "\(first)")
                let again = try await curlq(arguments)
                #expect(again.status == 0, "\(again)")
                #expect(files(in: folder) == ["report.pdf"], "a duplicate was kept")
                #expect(contents(folder.appendingPathComponent("report.pdf")) == FixtureServer.expectedBytes(count: 1000))
                let report = try #require(try again.jsonFiles().first)
                #expect(report["outcome"] as? String == "skipped", "\(report)")
                #expect(report["path"] as? String == folder.appendingPathComponent("report.pdf").path)
                #expect(report["nameFromServer"] as? Bool == true)
                #expect(again.stderr.contains("1 already there"), "\(again.stderr)")
            }
        }
    }

    /// Two files of a batch that get one name, or a name that is another file's of the batch,
    /// do not overwrite each other: `NAME`, then `NAME.1`, as clashing URL names do.
    @Test func filesOfOneBatchNeverOverwriteEachOther() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let run = try await curlq("get", "-J", "-j", "1", "-d", folder.path,
                                          Self.url(server, 10, "attachment; filename=same.bin"),
                                          Self.url(server, 20, "attachment; filename=same.bin"),
                                          Self.url(server, 30, "attachment; filename=40"),
                                          server.url("/bytes/40").absoluteString)
                #expect(run.status == 0, "\(run)")
                #expect(files(in: folder) == ["40", "40.1", "same.bin", "same.bin.1"])
                #expect(contents(folder.appendingPathComponent("same.bin")) == FixtureServer.expectedBytes(count: 10))
                #expect(contents(folder.appendingPathComponent("same.bin.1")) == FixtureServer.expectedBytes(count: 20))
                #expect(contents(folder.appendingPathComponent("40.1")) == FixtureServer.expectedBytes(count: 30))
                #expect(contents(folder.appendingPathComponent("40")) == FixtureServer.expectedBytes(count: 40))
            }
        }
    }

    /// A resumed file takes the name its 206 carries; a 206 without the field leaves it the
    /// URL's name (the first response's name is not kept across runs).
    @Test func aResumedFileTakesTheNameOfItsPartialResponse() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let body = FixtureServer.expectedBytes(count: 50_000)
                try Data(body[0..<20_000]).write(to: folder.appendingPathComponent("50000.part"))
                let named = try await curlq("get", "-J", "-c", "-d", folder.path, Self.url(server, 50_000, "attachment; filename=resumed.bin"))
                #expect(named.status == 0, "\(named)")
                #expect(server.requests.last?.header("Range") == "bytes=20000-")
                #expect(files(in: folder) == ["resumed.bin"])
                #expect(contents(folder.appendingPathComponent("resumed.bin")) == body)

                try Data(body[0..<20_000]).write(to: folder.appendingPathComponent("50000.part"))
                let unnamed = try await curlq("get", "-J", "-c", "-d", folder.path,
                                              Self.url(server, 50_000, "attachment; filename=whole-only.bin", "&cdWhole=1"))
                #expect(unnamed.status == 0, "\(unnamed)")
                #expect(server.requests.last?.header("Range") == "bytes=20000-")
                #expect(files(in: folder) == ["50000", "resumed.bin"])
                #expect(contents(folder.appendingPathComponent("50000")) == body)
            }
        }
    }

    /// A split download (-s) takes the name its range probe's response carries.
    @Test func aSplitFileTakesTheServersName() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let url = Self.url(server, 300_000, "attachment; filename=split.bin", "&etag=e1")
                let run = try await curlq("get", "-J", "-s", "3", "--progress", "lines", "-d", folder.path, url)
                #expect(run.status == 0, "\(run)")
                #expect(!run.stderr.contains("one connection"), "not split: \(run.stderr)")
                #expect(server.requests.filter { $0.header("Range") != nil }.count == 4, "the probe and 3 ranges")
                #expect(files(in: folder) == ["split.bin"])
                #expect(contents(folder.appendingPathComponent("split.bin")) == FixtureServer.expectedBytes(count: 300_000))
            }
        }
    }

    @Test func notWithASession() async throws {
        try await withFolder { folder in
            let run = try await curlq("get", "-J", "--session", folder.appendingPathComponent("s.db").path, "-d", folder.path,
                                      "http://127.0.0.1:9/x")
            #expect(run.status == 2, "\(run)")
            #expect(run.stderr.contains("-J/--remote-header-name and --session do not go together"), "\(run.stderr)")
        }
    }
}
