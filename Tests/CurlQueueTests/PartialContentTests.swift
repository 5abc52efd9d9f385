import CCurl
import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// A download to a file is renamed into place only when it is whole: a `206` must continue the
/// `.part` file where it ends and run to the end of the resource, and a `.part` file is resumed
/// only by the download that was told to resume it, or that wrote it.
@Suite struct PartialContentTests {
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

    // MARK: A file that changed on the server

    /// Whether the folder for test files keeps extended attributes, where a `.part` file keeps
    /// its validator (tmpfs does since Linux 6.6).
    static let keepsExtendedAttributes: Bool = {
        guard let folder = try? makeTemporaryFolder() else { return false }
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("probe").path
        guard FileManager.default.createFile(atPath: path, contents: Data()) else { return false }
        return setxattr(path, "user.probe", "1", 1, 0) == 0
    }()

    /// Version v of `/versioned/…?bytes=count`.
    func version(_ v: Int, _ count: Int) -> Data { Data(FixtureServer.expectedBytes(offset: v - 1, count: count)) }

    @Test(.enabled(if: keepsExtendedAttributes, "the temporary folder keeps no extended attributes"))
    func aRetryAfterTheFileChangedOnTheServerGetsTheNewFileWhole() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let destination = folder.appendingPathComponent("changing")
                // Version 1 is cut off after 50,000 bytes; the retry finds version 2.
                let request = Request(url: server.url("/versioned/a?bytes=200000&closeFirst=50000"), destination: destination)
                let response = try await retrying(request).response()
                #expect(response.attempts == 2)
                #expect(response.status == .ok)
                #expect(server.requests.map { $0.header("If-Range") } == [nil, "\"v1\""])
                #expect(server.requests.last?.header("Range") == "bytes=50000-")
                #expect(try Data(contentsOf: destination) == version(2, 200_000), "version 2 whole, not spliced onto version 1")
                #expect(getxattr(destination.path, "user.curlqueue.validator", nil, 0) < 0, "the finished file keeps no validator")
            }
        }
    }

    @Test(.enabled(if: keepsExtendedAttributes, "the temporary folder keeps no extended attributes"))
    func aResumeInALaterRunSendsTheValidatorKeptWithThePartFile() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let destination = folder.appendingPathComponent("later")
                let cut = await completion(of: RequestOperation(request: Request(
                    url: server.url("/versioned/b?bytes=100000&closeFirst=30000&weak=1"), destination: destination)))
                #expect(cut.failure?.transportFailure?.code == .partialFile)
                #expect(try Data(contentsOf: part(destination)) == version(1, 30_000))
                // A new operation, as a new run would make (`curlq -c`). The tag was weak: the
                // validator is the first version's Last-Modified.
                let resumed = Request(url: server.url("/versioned/b?bytes=100000&weak=1"), destination: destination, resume: true)
                let response = try await RequestOperation(request: resumed).response()
                #expect(response.status == .ok)
                let ifRange = try #require(server.requests.last?.header("If-Range"))
                #expect(!ifRange.hasPrefix("W/") && ifRange.hasSuffix(" GMT"), "\(ifRange)")
                #expect(try Data(contentsOf: destination) == version(2, 100_000))
            }
        }
    }
}
