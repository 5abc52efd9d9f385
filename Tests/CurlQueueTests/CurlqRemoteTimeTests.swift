@testable import curlq
import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// `-R/--remote-time` (issue 36, curl's -R): a downloaded file takes its response's Last-Modified.
@Suite struct CurlqRemoteTimeTests {
    private func modified(_ url: URL) -> Double? {
        (try? FileManager.default.attributesOfItem(atPath: url.path)[.modificationDate] as? Date)?.timeIntervalSince1970
    }

    @Test func aFileTakesItsServersTime() async throws {
        try await withServer { server in
            try await withFolder { folder in
                // /versioned/ID: version 1 says Last-Modified: 1,600,003,600 s after 1970.
                let run = try await curlq("get", "-R", "-d", folder.path, server.url("/versioned/r1?bytes=100").absoluteString,
                                          server.url("/bytes/10").absoluteString)
                #expect(run.status == 0, "\(run)")
                #expect(modified(folder.appendingPathComponent("r1")) == 1_600_003_600)
                let now = Date().timeIntervalSince1970
                #expect(abs((modified(folder.appendingPathComponent("10")) ?? 0) - now) < 600, "no Last-Modified: the time it was written")
            }
        }
    }
}
