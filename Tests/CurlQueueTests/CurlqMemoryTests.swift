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

/// curlq's memory stays flat, for many files and for a big one.
@Suite struct CurlqMemoryTests {
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
