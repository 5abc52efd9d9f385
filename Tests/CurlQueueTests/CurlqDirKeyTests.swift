@testable import curlq
import CurlQueueDownloads
import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// aria2's `dir=` input key: a file goes to a folder inside the output folder, made when the file
/// starts and never through a symbolic link; a path that would leave the folder is refused with
/// its line. `get`, `enqueue` and the daemon read it alike.
@Suite struct CurlqDirKeyTests {
    func parse(_ text: String) throws(InputFileError) -> [InputEntry] {
        try InputFile.parse(Data(text.utf8), origin: "urls.txt")
    }

    @Test func theFolderIsKeptTidiedAndOneThatLeavesTheOutputFolderIsRefused() throws {
        let entries = try parse("https://example.org/a\n  dir=./isos//ubuntu/\nhttps://example.org/b\n  dir=.\n")
        #expect(entries[0].dir == "isos/ubuntu")
        #expect(entries[1].dir == nil, "dir=. is the output folder")
        let refused: [(String, String)] = [
            ("/etc", "dir= takes a folder inside the output folder, as sub/folder, not '/etc'"),
            ("~/x", "dir= takes a folder inside the output folder, as sub/folder, not '~/x'"),
            ("a/../../b", "dir= may not leave the output folder (..): 'a/../../b'"),
            ("..", "dir= may not leave the output folder (..): '..'"),
            (".ssh", "dir=: '.ssh' is not a folder name curlq writes"),
            ("-rf", "dir=: '-rf' is not a folder name curlq writes"),
            ("a\u{7}b", "dir=: 'a\\u{7}b' is not a folder name curlq writes"),
            ("", "dir= needs a folder"),
        ]
        for (value, message) in refused {
            do {
                _ = try parse("https://example.org/a\n  out=x\n  dir=\(value)\n")
                Issue.record("dir=\(value) was taken")
            } catch {
                #expect(error.line == 3 && error.message.hasPrefix(message), "\(value): \(error)")
            }
        }
        #expect(throws: InputFileError(line: 3, message: "dir= is given twice for this URL")) {
            try parse("https://example.org/a\n  dir=a\n  dir=b\n")
        }
    }

    @Test func getWritesIntoTheFolderNamesUniquelyInItAndKeepsJInIt() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let disposition = CurlqRemoteHeaderNameTests.url(server, 300, "attachment; filename=theirs.bin")
                let input = """
                    \(server.baseURL)/bytes/100
                      dir=x/y
                      out=a.bin
                    \(server.baseURL)/bytes/200
                      dir=x/y
                      out=a.bin
                    \(server.baseURL)/bytes/300
                      dir=./z/
                      out=a.bin
                    \(disposition)
                      dir=j
                    """
                let run = try await curlq(["get", "-J", "--json", "--progress", "lines", "-d", folder.path, "-i", "-"], input: input)
                #expect(run.status == 0, "\(run)")
                #expect(contents(folder.appendingPathComponent("x/y/a.bin")) == FixtureServer.expectedBytes(count: 100))
                #expect(contents(folder.appendingPathComponent("x/y/a.bin.1")) == FixtureServer.expectedBytes(count: 200))
                #expect(contents(folder.appendingPathComponent("z/a.bin")) == FixtureServer.expectedBytes(count: 300))
                #expect(files(in: folder.appendingPathComponent("j")) == ["theirs.bin"], "-J names the file in its own folder")
                #expect(files(in: folder) == ["j", "x", "z"], "nothing in the output folder itself")
                let reports = try run.jsonFiles()
                #expect(reports[0]["path"] as? String == folder.appendingPathComponent("x/y/a.bin").path)
                #expect(reports[3]["path"] as? String == folder.appendingPathComponent("j/theirs.bin").path)
                #expect(run.stderr.contains("done     x/y/a.bin"), "\(run.stderr)")
                // Run again: the files are there, skipped as any other (the -J one once fetched
                // and found the same as the file under the server's name).
                let again = try await curlq(["get", "-J", "-d", folder.path, "-i", "-"], input: input)
                #expect(again.status == 0 && again.stderr.contains("0 downloaded, 4 already there"), "\(again)")
                #expect(again.stderr.contains("skipped  j/300  already there (300 B)"), "\(again)")
            }
        }
    }

    @Test func aSymbolicLinkOrAFileOnTheWayFailsThatFileAndNothingIsWrittenThroughIt() async throws {
        try await withServer { server in
            try await withFolder { folder in
                try await withFolder { outside in
                    let out = folder.appendingPathComponent("out")
                    try FileManager.default.createDirectory(at: out.appendingPathComponent("real"), withIntermediateDirectories: true)
                    try FileManager.default.createSymbolicLink(at: out.appendingPathComponent("ln"), withDestinationURL: outside)
                    try FileManager.default.createSymbolicLink(at: out.appendingPathComponent("real/deep"), withDestinationURL: outside)
                    try Data("x".utf8).write(to: out.appendingPathComponent("plain"))
                    let input = """
                        \(server.baseURL)/bytes/10
                          dir=ln
                        \(server.baseURL)/bytes/20
                          dir=real/deep/er
                        \(server.baseURL)/bytes/30
                          dir=plain/sub
                        \(server.baseURL)/bytes/40
                          dir=real
                        """
                    let run = try await curlq(["get", "--json", "-d", out.path, "-i", "-"], input: input)
                    #expect(run.status == 1, "\(run)")
                    let reports = try run.jsonFiles()
                    #expect(reports.map { $0["outcome"] as? String } == ["failed", "failed", "failed", "downloaded"], "\(reports)")
                    #expect((reports[0]["error"] as? String ?? "").contains("/ln is a symbolic link"), "\(reports[0])")
                    #expect((reports[1]["error"] as? String ?? "").contains("/real/deep is a symbolic link"), "\(reports[1])")
                    #expect((reports[2]["error"] as? String ?? "").contains("/plain is not a folder"), "\(reports[2])")
                    #expect(files(in: outside).isEmpty, "nothing written through a link")
                    #expect(contents(out.appendingPathComponent("real/40")) == FixtureServer.expectedBytes(count: 40))
                    #expect(server.requests.count == 1, "only the file that could be written was asked for")
                    let quiet = try await curlq(["get", "-q", "-d", out.path, "-i", "-"], input: input)
                    #expect(quiet.stderr.contains("curlq: failed: ln/10: "), "the summary names the file by its path in the folder: \(quiet)")
                }
            }
        }
    }

    @Test func enqueueStoresTheFolderAndTheDaemonWritesIntoIt() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let store = "sqlite:" + folder.appendingPathComponent("jobs.db").path
                let downloads = folder.appendingPathComponent("dl")
                let input = "\(server.baseURL)/bytes/500\n  dir=a/b\n  out=f.bin\n"
                let enqueued = try await curlq(["enqueue", "--store", store, "-i", "-"], input: input)
                #expect(enqueued.status == 0, "\(enqueued)")
                let daemon = try await curlq(["daemon", "--store", store, "-d", downloads.path, "--exit-when-done"])
                #expect(daemon.status == 0, "\(daemon)")
                #expect(contents(downloads.appendingPathComponent("a/b/f.bin")) == FixtureServer.expectedBytes(count: 500))
                let unsafe = try await curlq(["enqueue", "--store", store, "-i", "-"], input: "\(server.baseURL)/bytes/1\n  dir=a/b..c\n")
                #expect(unsafe.status == 2 && unsafe.stderr.contains("standard input:2: dir=: 'b..c' is not a folder name curlq writes"), "\(unsafe)")
                #expect(unsafe.stderr.contains("nothing was enqueued"), "\(unsafe)")
            }
        }
    }
}
