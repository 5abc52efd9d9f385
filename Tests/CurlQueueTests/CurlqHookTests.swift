@testable import curlq
import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `--on-download-complete COMMAND` (issue 36, aria2c's hook): COMMAND runs after each downloaded
/// file with its path as one argument, never through a shell; a failing hook makes exit status 1.
@Suite struct CurlqHookTests {
    /// Writes an executable shell script into `folder` and returns its path.
    private func script(_ folder: URL, _ name: String, _ body: String) throws -> String {
        let path = folder.appendingPathComponent(name).path
        // Close-on-exec: a curlq that another test starts meanwhile must not inherit the file
        // open for writing, which would make it "Text file busy" to run.
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o755)
        guard descriptor >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        defer { close(descriptor) }
        let text = Array(("#!/bin/sh\n" + body).utf8)
        guard write(descriptor, text, text.count) == text.count else { throw POSIXError(.EIO) }
        return path
    }

    @Test func theHookGetsEachFilesPathAsOneArgument() async throws {
        try await withServer { server in
            try await withFolder { tools in
                try await withFolder { folder in
                    let log = tools.appendingPathComponent("log").path
                    let hook = try script(tools, "hook.sh", "printf '%s|%s|%s|%s\\n' \"$#\" \"$1\" \"$CURLQ_URL\" \"$CURLQ_BYTES\" >> '\(log)'\necho on-stdout\n")
                    // A name a server or list chose, with shell syntax in it: one argument, never run.
                    let input = "\(server.url("/bytes/10"))\n  out=a; touch PWNED $(touch PWNED2)\n\(server.url("/bytes/20"))\n"
                    let run = try await curlq(["get", "--json", "-j", "1", "-d", folder.path, "--on-download-complete", hook, "-i", "-"], input: input)
                    #expect(run.status == 0, "\(run)")
                    let lines = (try? String(contentsOfFile: log, encoding: .utf8))?.split(separator: "\n").map(String.init) ?? []
                    let first = folder.appendingPathComponent("a; touch PWNED $(touch PWNED2)").path
                    #expect(lines == ["1|\(first)|\(server.url("/bytes/10"))|10",
                                      "1|\(folder.appendingPathComponent("20").path)|\(server.url("/bytes/20"))|20"], "\(lines)")
                    #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("PWNED").path))
                    #expect(!FileManager.default.fileExists(atPath: tools.appendingPathComponent("PWNED2").path))
                    // The hook's standard output goes to standard error: the JSON report stays whole.
                    #expect(run.stderr.contains("on-stdout") && !run.stdout.contains("on-stdout"), "\(run)")
                    let files = try run.jsonFiles()
                    #expect(files.allSatisfy { ($0["hook"] as? [String: Any])?["ok"] as? Bool == true }, "\(files)")
                }
            }
        }
    }

    @Test func aFailingHookIsReportedAndExitsOne() async throws {
        try await withServer { server in
            try await withFolder { tools in
                try await withFolder { folder in
                    let hook = try script(tools, "fail.sh", "exit 3\n")
                    let run = try await curlq("get", "--json", "-d", folder.path, "--on-download-complete", hook, server.url("/bytes/10").absoluteString)
                    #expect(run.status == 1, "\(run)")
                    #expect(run.stderr.contains("10: --on-download-complete exited with status 3"), "\(run.stderr)")
                    #expect(contents(folder.appendingPathComponent("10")) == FixtureServer.expectedBytes(count: 10), "the file stays")
                    let record = try #require(try run.jsonFiles().first)
                    #expect(record["outcome"] as? String == "downloaded")
                    let hookRecord = try #require(record["hook"] as? [String: Any], "\(record)")
                    #expect(hookRecord["ok"] as? Bool == false && hookRecord["exitStatus"] as? Int == 3, "\(record)")

                    let missing = try await curlq("get", "-q", "--overwrite", "-d", folder.path, "--on-download-complete",
                                                  tools.appendingPathComponent("none").path, server.url("/bytes/10").absoluteString)
                    #expect(missing.status == 1, "\(missing)")
                    #expect(missing.stderr.contains("--on-download-complete: 10: could not start: No such file or directory"), "\(missing.stderr)")
                    let shellLine = try await curlq("get", "-d", folder.path, "--on-download-complete", "echo $1 | mail", server.url("/bytes/10").absoluteString)
                    #expect(shellLine.status == 2 && shellLine.stderr.contains("never a shell line"), "\(shellLine)")
                }
            }
        }
    }
}
