@testable import curlq
import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// curl's and aria2c's habits typed at curlq (issue 36): each gets a message naming the option
/// as typed and curlq's spelling, exit 2 and no request; the habits that are curlq's behaviour
/// anyway (`-L`, `-f`) are accepted.
@Suite struct CurlqHabitsTests {
    @Test func foreignOptionsAndSlipsNameWhatToType() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let good = server.url("/bytes/10").absoluteString
                let hostAndPath = good.replacingOccurrences(of: "http://", with: "")
                let cases: [([String], String)] = [
                    (["get", "--retry", "3", good], "unknown option '--retry': curl's --retry N is --retries N here"),
                    (["get", "--retry=3", good], "unknown option '--retry'"),
                    (["get", "-x", "8", good], "unknown option '-x': aria2c's -x N is -s/--split N here"),
                    (["get", "-x8", good], "unknown option '-x'"),
                    (["get", "-C", "-", good], "unknown option '-C': a .part file is resumed by default"),
                    (["get", "-m", "60", good], "--max-file-time"),
                    (["get", "--frobnicate", "3", good], "unknown option '--frobnicate'"),
                    (["get", "-j", "-1", good], "--jobs must be 0 (no limit) or more, not -1"),
                    (["get", "--per-host", "-2", good], "--per-host must be 0 (no limit) or more, not -2"),
                    (["get", "-s", good], "not curl's --silent, which is -q/--quiet"),
                    ([good], "is not a command: curlq downloads with its get command: curlq get \(good)"),
                    (["get", hostAndPath], "a URL needs its scheme: 'https://\(hostAndPath)'"),
                    (["get", "example.org/a.iso"], "not a URL: 'example.org/a.iso'; a URL needs its scheme: 'https://example.org/a.iso'"),
                ]
                for (arguments, message) in cases {
                    let run = try await curlq(arguments)
                    #expect(run.status == 2, "\(arguments): \(run)")
                    #expect(run.stderr.contains(message), "\(arguments): \(run.stderr)")
                    if !arguments.contains(where: { $0.hasSuffix(".iso") || $0 == hostAndPath }) {
                        #expect(!run.stderr.contains("not a URL: '"), "\(arguments): a value taken for a URL: \(run.stderr)")
                    }
                }
                #expect(server.requests.isEmpty, "a usage error sent \(server.requests.count) request(s)")
                #expect(files(in: folder).isEmpty)
            }
        }
    }

    /// `-L` and `-f` are what curlq does anyway: accepted, and a 404 still fails its file.
    @Test func locationAndFailAreAccepted() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let run = try await curlq("get", "-L", "-f", "--location", "--fail", "-d", folder.path, "--retries", "0",
                                          server.url("/redirect-chain/1").absoluteString, server.url("/status/404").absoluteString)
                #expect(run.status == 1, "\(run)")
                #expect(contents(folder.appendingPathComponent("1")) == Array("end".utf8), "\(run)")
                #expect(run.stderr.contains("HTTP 404 Not Found"), "\(run.stderr)")
                #expect(files(in: folder) == ["1"], "an error body was saved")
            }
        }
    }

    /// Every bad line of an input file is reported in one run, not the first alone.
    @Test func everyBadInputLineIsReported() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let good = server.url("/bytes/10").absoluteString
                let input = "\(good)\n  priority=urgent\nnot-a-url\n  out=x\nftp://example.org/x\n\(good)?b\n  colour=red\n"
                let run = try await curlq("get", "-d", folder.path, "-i", "-", input: input)
                #expect(run.status == 2, "\(run)")
                for line in ["standard input:2: priority must be high, normal or low", "standard input:3: not a URL: 'not-a-url'",
                             "standard input:5: only http and https", "standard input:7: unknown key 'colour'",
                             "4 bad input lines; nothing was downloaded"] {
                    #expect(run.stderr.contains(line), "missing \(line): \(run.stderr)")
                }
                #expect(!run.stderr.contains(":4:"), "the option line of a bad URL is its URL's: \(run.stderr)")
                #expect(server.requests.isEmpty)
            }
        }
    }
}
