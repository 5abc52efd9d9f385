import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// `maxResponseBodySize` bounds what a server can make a client hold, and `discardsBody`
/// lets a client count a body without keeping it.
@Suite struct ResponseBodyLimitTests {
    @Test func anAnnouncedBodyOverTheLimitIsRefusedBeforeItArrives() async throws {
        try await withServer { server in
            var request = Request(url: server.url("/bytes/100000"))
            request.maxResponseBodySize = 99_999
            let result = await completion(of: RequestOperation(request: request))
            #expect(transportCode(of: result) == .fileSizeExceeded, "\(result)")
        }
    }

    @Test func aChunkedBodyFailsAsSoonAsItPassesTheLimit() async throws {
        try await withServer { server in
            var request = Request(url: server.url("/bytes/10000000?chunked=1&chunk=1000"))
            request.maxResponseBodySize = 50_000
            let result = await completion(of: RequestOperation(request: request))
            #expect(transportCode(of: result) == .fileSizeExceeded, "\(result)")
            guard case .failure(let error) = result else { return }
            #expect("\(error)".contains("50000"))
        }
    }

    @Test func aBodyOfExactlyTheLimitArrivesWhole() async throws {
        try await withServer { server in
            for path in ["/bytes/4096", "/bytes/4096?chunked=1&chunk=100"] {
                var request = Request(url: server.url(path))
                request.maxResponseBodySize = 4096
                let response = try await RequestOperation(request: request).response()
                #expect(response.body == Data(FixtureServer.expectedBytes(count: 4096)), "\(path)")
            }
        }
    }

    @Test func aDownloadOverTheLimitLeavesNoFileBehind() async throws {
        try await withServer { server in
            let folder = try makeTemporaryFolder()
            defer { try? FileManager.default.removeItem(at: folder) }
            let destination = folder.appendingPathComponent("big")
            var request = Request(url: server.url("/bytes/2000000?chunked=1"), destination: destination)
            request.maxResponseBodySize = 100_000
            let result = await completion(of: RequestOperation(request: request))
            #expect(transportCode(of: result) == .fileSizeExceeded, "\(result)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty)
        }
    }

    @Test func theLimitCountsTheResumedPartOfAFile() async throws {
        try await withServer { server in
            let folder = try makeTemporaryFolder()
            defer { try? FileManager.default.removeItem(at: folder) }
            let destination = folder.appendingPathComponent("file")
            try Data(FixtureServer.expectedBytes(count: 60_000)).write(to: URL(fileURLWithPath: destination.path + ".part"))
            var request = Request(url: server.url("/bytes/100000?chunked=1"), destination: destination, resume: true)
            request.maxResponseBodySize = 80_000
            let result = await completion(of: RequestOperation(request: request))
            #expect(transportCode(of: result) == .fileSizeExceeded, "\(result)")
            #expect(server.requests.last?.header("Range") == "bytes=60000-")
        }
    }

    @Test func aDiscardedBodyIsCountedButNotKept() async throws {
        try await withServer { server in
            var request = Request(url: server.url("/bytes/3000000"))
            request.discardsBody = true
            let progress = LockedBox([TransferProgress]())
            let operation = RequestOperation(request: request)
            operation.downloadProgressHandler = { value in progress.update { $0.append(value) } }
            let result = await completion(of: operation)
            let response = try result.get()
            #expect(response.status == .ok)
            #expect(response.body.isEmpty)
            #expect(response.metrics.bytesReceived >= 3_000_000)
            #expect(progress.value.last == TransferProgress(bytesTransferred: 3_000_000, totalBytes: 3_000_000))
        }
    }

    /// A gzip "bomb": 16 MiB of zeros compressed to about 16 KB, sent with
    /// `Content-Encoding: gzip` although none was asked for. CurlQueue decodes nothing, so the
    /// body is kept exactly as it came, and the limit counts the bytes on the wire: it can
    /// never be made to expand in memory.
    @Test func aCompressedBodyIsKeptAsSentAndTheLimitCountsItsWireBytes() async throws {
        let bomb = try await gzipOfZeros(count: 16 << 20)
        #expect(bomb.count < 64 * 1024)
        try await withServer { server in
            var request = Request(url: server.url("/reflect?encoding=gzip"), method: .post)
            request.body = .bytes(bomb)
            request.maxResponseBodySize = 1 << 20
            let response = try await RequestOperation(request: request).response()
            #expect(response.headerFields[.contentEncoding] == "gzip")
            #expect(response.body == bomb)
            #expect(response.metrics.bytesReceived < 1 << 20)

            // A limit below the compressed size stops it, as any body.
            request.maxResponseBodySize = Int64(bomb.count - 1)
            let result = await completion(of: RequestOperation(request: request))
            #expect(transportCode(of: result) == .fileSizeExceeded, "\(result)")
        }
    }

    /// `gzip -9 -n` of `count` zero bytes, made by Debian's gzip.
    func gzipOfZeros(count: Int) async throws -> Data {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let input = folder.appendingPathComponent("zeros")
        try Data(count: count).write(to: input)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/gzip")
        // (runToEnd reads stdout as text: gzip's bytes go through a file instead.)
        let output = folder.appendingPathComponent("zeros.gz")
        process.arguments = ["-9", "-n", "-k", "-f", input.path]
        let status = try await runToEnd(process).status
        #expect(status == 0)
        return try Data(contentsOf: output)
    }

    /// A body kept in memory has a default limit (64 MiB): a server announcing 70 MB is
    /// refused before the body, one sending it chunked as soon as it passes the limit.
    @Test(arguments: ["/bytes/70000000", "/bytes/70000000?chunked=1&chunk=1000000"])
    func aBodyKeptInMemoryHasADefaultLimit(_ path: String) async throws {
        let expected: Int64 = 64 * 1024 * 1024
        #expect(Request(string: "http://127.0.0.1/").maxInMemoryBodySize == expected)
        try await withServer { server in
            let result = await completion(of: RequestOperation(request: Request(url: server.url(path))))
            #expect(transportCode(of: result) == .fileSizeExceeded, "\(result)")
        }
    }

    @Test func theInMemoryLimitIsConfiguredPerRequestAndNilMeansNone() async throws {
        try await withServer { server in
            var request = Request(url: server.url("/bytes/5000?chunked=1&chunk=100"))
            request.maxInMemoryBodySize = 4999
            let result = await completion(of: RequestOperation(request: request))
            #expect(transportCode(of: result) == .fileSizeExceeded, "\(result)")
            guard case .failure(let error) = result else { return }
            #expect("\(error)".contains("maxInMemoryBodySize"))

            var unlimited = Request(url: server.url("/bytes/70000000"))
            unlimited.maxInMemoryBodySize = nil
            let whole = try await RequestOperation(request: unlimited).response()
            #expect(whole.body.count == 70_000_000)
        }
    }

    /// The in-memory limit does not apply to a body written to a file, nor to one discarded.
    @Test func downloadsToFilesAreNotLimitedByTheInMemoryLimit() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let destination = folder.appendingPathComponent("file")
                var request = Request(url: server.url("/bytes/5000"), destination: destination)
                request.maxInMemoryBodySize = 1000
                let response = try await RequestOperation(request: request).response()
                #expect(response.fileURL == destination)
                #expect(try Data(contentsOf: destination).count == 5000)

                var discarded = Request(url: server.url("/bytes/5000"))
                discarded.maxInMemoryBodySize = 1000
                discarded.discardsBody = true
                let counted = try await RequestOperation(request: discarded).response()
                #expect(counted.status == .ok)
            }
        }
    }
}
