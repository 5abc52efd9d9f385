import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// Downloads to a file: `.part` while incomplete, renamed atomically, resumable.
@Suite struct DownloadTests {
    @Test func aCompleteDownloadIsRenamedIntoPlace() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let destination = folder.appendingPathComponent("file.bin")
                let request = Request(url: server.url("/bytes/777777"), destination: destination)
                let response = try await RequestOperation(request: request).response()
                #expect(response.fileURL == destination)
                #expect(response.body.isEmpty)
                #expect(try Data(contentsOf: destination) == Data(FixtureServer.expectedBytes(count: 777_777)))
                #expect(!exists(part(destination)))
            }
        }
    }

    @Test func anEmptyBodyMakesAnEmptyFile() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let destination = folder.appendingPathComponent("empty")
                _ = try await RequestOperation(request: Request(url: server.url("/bytes/0"), destination: destination)).response()
                #expect(try Data(contentsOf: destination).isEmpty)
            }
        }
    }

    @Test func anErrorStatusWritesNoFile() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let destination = folder.appendingPathComponent("missing")
                let response = try await RequestOperation(request: Request(url: server.url("/status/404"), destination: destination)).response()
                #expect(response.status == .notFound)
                #expect(String(decoding: response.body, as: UTF8.self) == "status 404")
                #expect(!exists(destination))
                #expect(!exists(part(destination)))
            }
        }
    }

    @Test func aBrokenTransferLeavesOnlyThePartFile() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let destination = folder.appendingPathComponent("broken")
                let result = await completion(of: RequestOperation(request: Request(url: server.url("/bytes/100000?closeAfter=30000&chunk=10000"), destination: destination)))
                #expect(result.failure?.transportFailure?.code == .partialFile)
                #expect(!exists(destination))
                let partial = try Data(contentsOf: part(destination))
                #expect(partial.count == 30_000)
            }
        }
    }

    @Test func resumeAsksForTheRestAndAppends() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let destination = folder.appendingPathComponent("resumed")
                try Data(FixtureServer.expectedBytes(count: 123_456)).write(to: part(destination))
                let request = Request(url: server.url("/bytes/500000"), destination: destination, resume: true)
                let progress = LockedBox([TransferProgress]())
                let operation = RequestOperation(request: request)
                operation.downloadProgressHandler = { value in progress.update { $0.append(value) } }
                let response = try await completion(of: operation).get()
                #expect(response.status == .partialContent)
                #expect(server.requests.last?.header("Range") == "bytes=123456-")
                #expect(try Data(contentsOf: destination) == Data(FixtureServer.expectedBytes(count: 500_000)))
                #expect(progress.value.last == TransferProgress(bytesTransferred: 500_000, totalBytes: 500_000))
                #expect(progress.value.allSatisfy { $0.bytesTransferred >= 123_456 || $0.bytesTransferred == 0 })
            }
        }
    }

    @Test func resumeStartsOverCleanlyWhenTheServerSendsEverything() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let destination = folder.appendingPathComponent("restarted")
                try Data(repeating: 0xEE, count: 5000).write(to: part(destination))
                let request = Request(url: server.url("/bytes/20000?norange=1"), destination: destination, resume: true)
                let response = try await RequestOperation(request: request).response()
                #expect(response.status == .ok)
                #expect(try Data(contentsOf: destination) == Data(FixtureServer.expectedBytes(count: 20_000)))
            }
        }
    }

    @Test func resumeOfAnAlreadyCompletePartStartsOver() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let destination = folder.appendingPathComponent("complete")
                try Data(FixtureServer.expectedBytes(count: 30_000)).write(to: part(destination))
                let request = Request(url: server.url("/bytes/30000"), destination: destination, resume: true)
                let response = try await RequestOperation(request: request).response()
                #expect(response.status == .ok)
                #expect(try Data(contentsOf: destination) == Data(FixtureServer.expectedBytes(count: 30_000)))
                #expect(server.requests.count == 2)  // the 416, then the whole file
            }
        }
    }

    @Test func withoutResumeAStalePartIsReplaced() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let destination = folder.appendingPathComponent("stale")
                try Data(repeating: 1, count: 99_999).write(to: part(destination))
                _ = try await RequestOperation(request: Request(url: server.url("/bytes/1000"), destination: destination)).response()
                #expect(try Data(contentsOf: destination) == Data(FixtureServer.expectedBytes(count: 1000)))
                #expect(server.requests.last?.header("Range") == nil)
            }
        }
    }

    @Test func aRetryAfterADropResumesFromThePartFile() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let destination = folder.appendingPathComponent("retried")
                let operation = RequestOperation(request: Request(url: server.url("/flaky/big?failures=1&mode=closeMidBody&bytes=400000"), destination: destination))
                operation.autoRetry = true
                operation.retryPolicy = RetryPolicy(initialBackoff: .milliseconds(10))
                let response = try await operation.response()
                #expect(response.attempts == 2)
                #expect(server.requests.last?.header("Range") != nil)
                #expect(try Data(contentsOf: destination) == Data(FixtureServer.expectedBytes(count: 400_000)))
            }
        }
    }

    @Test func aMissingDestinationFolderIsAClearError() async throws {
        try await withServer { server in
            let destination = URL(fileURLWithPath: "/nonexistent-\(UUID().uuidString)/file")
            let result = await completion(of: RequestOperation(request: Request(url: server.url("/bytes/10"), destination: destination)))
            guard case .failure(.fileSystem) = result else {
                Issue.record("expected a file-system error, got \(result)")
                return
            }
            #expect(server.requests.isEmpty)
        }
    }

    /// A 1 GiB body streams to disk with flat memory. Measured in a process of its own so
    /// that other tests running meanwhile do not count.
    @Test(.disabled(if: ProcessInfo.processInfo.environment["CURLQUEUE_SANITIZER"] != nil,
                    "a sanitizer's shadow memory makes RSS meaningless"))
    func aGigabyteStreamsToDiskInFlatMemory() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let destination = folder.appendingPathComponent("huge")
                let size = 1 << 30
                let output = try await runBuiltProduct("MemoryProbe", [server.url("/bytes/\(size)").absoluteString, destination.path])
                #expect(output.hasPrefix("status=200"), "\(output)")
                let peak = Int(output.split(separator: "peak=").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? .max
                let attributes = try FileManager.default.attributesOfItem(atPath: destination.path)
                #expect((attributes[.size] as? NSNumber)?.intValue == size)
                #expect(peak < 64 << 20, "peak RSS \(peak >> 20) MiB")
            }
        }
    }
}
