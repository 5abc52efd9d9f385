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

/// The files curlq leaves in its folder: hostile and clashing names, files already there.
@Suite struct CurlqFolderTests {
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
}
