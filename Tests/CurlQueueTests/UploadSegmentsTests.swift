@testable import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// `Request.Body.segments`: bytes and files sent in order as one body.
@Suite struct UploadSegmentsTests {
    struct Echo: Decodable {
        var method: String
        var headers: [[String]]
        var bodyLength: Int
        var body: String

        func values(_ name: String) -> [String] {
            headers.filter { $0[0].lowercased() == name.lowercased() }.map { $0[1] }
        }
    }

    /// A folder with one file of `size` pattern bytes starting at pattern offset `offset`.
    func makeFile(size: Int, offset: Int = 0) throws -> (folder: URL, file: URL, bytes: Data) {
        let folder = try makeTemporaryFolder()
        let file = folder.appendingPathComponent("part.bin")
        let bytes = Data(FixtureServer.expectedBytes(offset: offset, count: size))
        try bytes.write(to: file)
        return (folder, file, bytes)
    }

    @Test func bytesFileBytesArriveByteIdenticalWithContentLength() async throws {
        try await withServer { server in
            let (folder, file, fileBytes) = try makeFile(size: 300_007, offset: 11)
            defer { try? FileManager.default.removeItem(at: folder) }
            let head = Data("--boundary\r\nContent-Type: application/octet-stream\r\n\r\n".utf8)
            let tail = Data("\r\n--boundary--\r\n".utf8)
            let request = Request(url: server.url("/echo"), method: .post,
                                  body: .segments([.bytes(head), .file(file), .bytes(Data()), .bytes(tail)]))
            let response = try await RequestOperation(request: request).response()
            let echo = try JSONDecoder().decode(Echo.self, from: response.body)
            let expected = head + fileBytes + tail
            #expect(echo.bodyLength == expected.count)
            #expect(Data(base64Encoded: echo.body) == expected)
            #expect(echo.values("Content-Length") == ["\(expected.count)"])
            #expect(echo.values("Transfer-Encoding").isEmpty)
        }
    }

    @Test func aRedirect307SendsTheWholeBodyAgain() async throws {
        try await withServer { server in
            let (folder, file, fileBytes) = try makeFile(size: 200_000)
            defer { try? FileManager.default.removeItem(at: folder) }
            let first = Data("first;".utf8), last = Data(";last".utf8)
            let request = Request(url: server.url("/redirect?to=/echo&status=307"), method: .put,
                                  body: .segments([.bytes(first), .file(file), .bytes(last)]))
            let response = try await RequestOperation(request: request).response()
            let echo = try JSONDecoder().decode(Echo.self, from: response.body)
            let expected = first + fileBytes + last
            #expect(echo.method == "PUT")
            #expect(Data(base64Encoded: echo.body) == expected)
            #expect(server.requests.map(\.path) == ["/redirect", "/echo"])
            #expect(server.requests.map(\.bodyLength) == [expected.count, expected.count])
        }
    }

    @Test func aRetrySendsTheWholeBodyAgain() async throws {
        try await withServer { server in
            let (folder, file, fileBytes) = try makeFile(size: 100_000)
            defer { try? FileManager.default.removeItem(at: folder) }
            let request = Request(url: server.url("/flaky/seg?failures=1&mode=close"), method: .post,
                                  body: .segments([.file(file), .bytes(Data("!".utf8)), .file(file)]))
            let operation = RequestOperation(request: request)
            operation.autoRetry = true
            operation.retryPolicy = RetryPolicy(initialBackoff: .milliseconds(1))
            let response = try await operation.response()
            #expect(response.status == .ok)
            #expect(response.attempts == 2)
            #expect(server.requests.map(\.bodyLength) == [2 * fileBytes.count + 1, 2 * fileBytes.count + 1])
        }
    }

    @Test func aMissingFileIsAnInvalidRequestAndNothingIsSent() async throws {
        try await withServer { server in
            let missing = URL(fileURLWithPath: "/nonexistent/curlqueue-\(UUID().uuidString)")
            let request = Request(url: server.url("/echo"), method: .post,
                                  body: .segments([.bytes(Data("a".utf8)), .file(missing)]))
            let result = await completion(of: RequestOperation(request: request))
            guard case .failure(.invalidRequest(let reason)) = result else {
                Issue.record("expected invalidRequest, got \(result)")
                return
            }
            #expect(reason.contains(missing.path))
            #expect(server.requests.isEmpty)
            #expect(server.connectionsAccepted == 0)
        }
    }

    @Test func aLargeFileIsSentWhole() async throws {
        try await withServer { server in
            let (folder, file, fileBytes) = try makeFile(size: 24 * 1024 * 1024 + 3)
            defer { try? FileManager.default.removeItem(at: folder) }
            let request = Request(url: server.url("/echo"), method: .put,
                                  body: .segments([.bytes(Data("x".utf8)), .file(file)]))
            let response = try await RequestOperation(request: request).response()
            let echo = try JSONDecoder().decode(Echo.self, from: response.body)
            #expect(echo.bodyLength == fileBytes.count + 1)
        }
    }

    /// A 512 MiB file goes out in flat memory. Measured in a process of its own so that other
    /// tests running meanwhile do not count.
    @Test(.disabled(if: ProcessInfo.processInfo.environment["CURLQUEUE_SANITIZER"] != nil,
                    "a sanitizer's shadow memory makes RSS meaningless"))
    func aLargeFileIsSentInFlatMemory() async throws {
        try await withServer { server in
            let folder = try makeTemporaryFolder()
            let file = folder.appendingPathComponent("big.bin")
            let size = 512 << 20
            // Writing (and removing) 512 MiB takes seconds, tens of them on a busy disk: on a
            // thread of its own, not on one of the concurrency pool's two, which every other
            // test of the parallel suite needs.
            try await offThePool {
                _ = FileManager.default.createFile(atPath: file.path, contents: nil)
                let handle = try FileHandle(forWritingTo: file)
                let block = Data(FixtureServer.expectedBytes(count: 1 << 20))
                for _ in 0..<(size >> 20) { try handle.write(contentsOf: block) }
                try handle.close()
            }
            defer { Thread { try? FileManager.default.removeItem(at: folder) }.start() }
            let output = try await runBuiltProduct("MemoryProbe", ["--upload", server.url("/echo").absoluteString, file.path])
            #expect(output.hasPrefix("status=200 sent=\(size + 8) "), "\(output)")
            #expect(server.requests.last?.bodyLength == size + 8)
            let peak = Int(output.split(separator: "peak=").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? .max
            #expect(peak < 64 << 20, "peak RSS \(peak >> 20) MiB")
            print("segments upload: \(size >> 20) MiB file sent, peak RSS \(peak >> 20) MiB")
        }
    }

    // MARK: UploadSource on its own

    func readAll(_ source: UploadSource, bufferSize: Int = 7) throws -> Data {
        var result = Data()
        var buffer = [UInt8](repeating: 0, count: bufferSize)
        while true {
            let n = try buffer.withUnsafeMutableBytes { try source.read(into: $0) }
            if n == 0 { return result }
            result.append(contentsOf: buffer[0..<n])
        }
    }

    @Test func theSourceReadsPartsInOrderAndRewinds() throws {
        let (folder, file, fileBytes) = try makeFile(size: 1000)
        defer { try? FileManager.default.removeItem(at: folder) }
        let source = try UploadSource(.segments([.bytes(Data([1, 2, 3])), .file(file), .bytes(Data()), .file(file), .bytes(Data([9]))]))
        let expected = Data([1, 2, 3]) + fileBytes + fileBytes + Data([9])
        #expect(source.count == Int64(expected.count))
        #expect(try readAll(source) == expected)
        #expect(source.seek(to: 500))
        #expect(try readAll(source, bufferSize: 4096) == expected.suffix(from: 500))
        #expect(source.seek(to: 0))
        #expect(try readAll(source, bufferSize: 1) == expected)
        #expect(!source.seek(to: Int64(expected.count) + 1))
    }

    @Test func aFileThatShrinksMidBodyIsAnErrorNotAnEarlyEnd() throws {
        let (folder, file, _) = try makeFile(size: 10_000)
        defer { try? FileManager.default.removeItem(at: folder) }
        let source = try UploadSource(.segments([.bytes(Data([1])), .file(file)]))
        var buffer = [UInt8](repeating: 0, count: 4096)
        let first = try buffer.withUnsafeMutableBytes { try source.read(into: $0) }
        #expect(first == 1)
        #expect(truncate(file.path, 5000) == 0)
        do {
            _ = try readAll(source, bufferSize: 4096)
            Issue.record("the read went on past the end of the shrunk file")
        } catch {
            guard case .fileSystem(let reason) = error as? RequestError else {
                Issue.record("expected fileSystem, got \(error)")
                return
            }
            #expect(reason.contains("shrank"))
        }
    }

    @Test func aFileThatGrowsSendsTheSizeItHadAtTheStart() throws {
        let (folder, file, fileBytes) = try makeFile(size: 5000)
        defer { try? FileManager.default.removeItem(at: folder) }
        let source = try UploadSource(.file(file))
        let handle = try FileHandle(forWritingTo: file)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(repeating: 0xFF, count: 100))
        try handle.close()
        #expect(try readAll(source, bufferSize: 4096) == fileBytes)
    }
}
