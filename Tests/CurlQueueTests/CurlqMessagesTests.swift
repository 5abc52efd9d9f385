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
                    let run = try await runCurlq(["get", "-q", "--overwrite", "-d", folder.path] + arguments + [url])
                    #expect(run.status == 0, "\(run)")
                    return server.requests.last?.header("User-Agent")
                }
                #expect(try await agent() == "curlq/\(CurlqVersion.number)")
                #expect(try await agent("-A", "Mozilla/5.0 (X11)") == "Mozilla/5.0 (X11)")
                #expect(try await agent("--user-agent", "mine/1", "-H", "User-Agent: byhand/2") == "byhand/2")
                #expect(try await agent("-A", "") == nil)
                let bad = try await runCurlq("get", "-A", "a\u{1}b", url)
                #expect(bad.status == 2 && bad.stderr.contains("-A/--user-agent"), "\(bad)")
            }
        }
    }
}
