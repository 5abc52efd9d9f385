import CurlQueue
import CurlQueueTestSupport
import Foundation
import Testing

/// A download to a file is renamed into place only when it is whole: a `206` must continue the
/// `.part` file where it ends and run to the end of the resource, and a `.part` file is resumed
/// only by the download that was told to resume it, or that wrote it.
@Suite struct PartialContentTests {
    func withFolder<T>(_ body: (URL) async throws -> T) async throws -> T {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        return try await body(folder)
    }

    func exists(_ url: URL) -> Bool { FileManager.default.fileExists(atPath: url.path) }
    func part(_ url: URL) -> URL { URL(fileURLWithPath: url.path + ".part") }
    func expected(_ count: Int) -> Data { Data(FixtureServer.expectedBytes(count: count)) }

    func retrying(_ request: Request) -> RequestOperation {
        let operation = RequestOperation(request: request)
        operation.autoRetry = true
        operation.retryPolicy = RetryPolicy(initialBackoff: .milliseconds(10))
        return operation
    }

    @Test func aRetryDoesNotResumeAPartFileTheDownloadWasNotToldToResume() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let destination = folder.appendingPathComponent("stale")
                try Data(repeating: 0xEE, count: 50_000).write(to: part(destination))
                // A dropped connection first (no body: the stale .part is not touched), then the file,
                // Range honoured: a retry that resumed would append it to the stale bytes.
                let request = Request(url: server.url("/flaky/stale?failures=1&mode=close&bytes=100000&ranges=1"), destination: destination)
                let response = try await retrying(request).response()
                #expect(response.attempts == 2)
                #expect(response.status == .ok)
                #expect(server.requests.map { $0.header("Range") } == [nil, nil])
                #expect(try Data(contentsOf: destination) == expected(100_000))
                #expect(!exists(part(destination)))
            }
        }
    }

    @Test func aShorterRangeThanTheRestOfTheFileIsNotSavedAsTheFile() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let destination = folder.appendingPathComponent("short")
                try expected(50_000).write(to: part(destination))
                let request = Request(url: server.url("/bytes/100000?rangeShort=10"), destination: destination, resume: true)
                let result = await completion(of: RequestOperation(request: request))
                #expect(result.failure?.transportFailure?.code == .partialFile)
                #expect(result.failure?.transportFailure?.message.contains("50000-50009 of 100000") == true)
                #expect(!exists(destination))
                // What arrived is the file's next 10 bytes: kept for a resume.
                #expect(try Data(contentsOf: part(destination)) == expected(50_010))
            }
        }
    }

    @Test func anEmptyPartialAnswerToAResumeNeitherTruncatesNorCompletesTheFile() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let destination = folder.appendingPathComponent("empty206")
                try expected(50_000).write(to: part(destination))
                // A 206 with no body and no Content-Range answers no range: the attempt runs
                // again from byte 0, without a Range.
                let request = Request(url: server.url("/bytes/100000?rangeEmpty=1"), destination: destination, resume: true)
                let response = try await RequestOperation(request: request).response()
                #expect(response.status == .ok)
                #expect(server.requests.map { $0.header("Range") } == ["bytes=50000-", nil])
                #expect(try Data(contentsOf: destination) == expected(100_000))
                #expect(!exists(part(destination)))
            }
        }
    }

    @Test func aPartNobodyAskedForIsKeptAsAPartFileNotAsTheFile() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let destination = folder.appendingPathComponent("unasked")
                let request = Request(url: server.url("/bytes/100000?unasked=1000"), destination: destination)
                let result = await completion(of: RequestOperation(request: request))
                #expect(result.failure?.transportFailure?.code == .partialFile)
                #expect(!exists(destination))
                let kept = try Data(contentsOf: part(destination))
                #expect(kept == expected(1000))
            }
        }
    }

    @Test func aRetryCompletesAPartNobodyAskedFor() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let destination = folder.appendingPathComponent("unasked-retried")
                let request = Request(url: server.url("/bytes/100000?unasked=1000"), destination: destination)
                let response = try await retrying(request).response()
                #expect(response.attempts == 2)
                #expect(server.requests.map { $0.header("Range") } == [nil, "bytes=1000-"])
                #expect(try Data(contentsOf: destination) == expected(100_000))
            }
        }
    }
}
