import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// Two transfers to one destination at once (two processes, such as a durable worker stopped
/// past its lease and the one that took its job over, or two operations of one process): the
/// later one never resumes or appends to the `.part` the other still writes.
@Suite struct SharedPartFileTests {
    /// The first download, resumed, holds at 30,000 of 100,000 bytes with its `.part` open. A second
    /// one to the same destination, asked to resume, starts a file of its own (no `Range`),
    /// completes it, and moves it into place. When the first goes on, its bytes go to the file
    /// it opened, which has no name any more: the finished file stays byte-identical, and the
    /// first fails (its `.part` was replaced) instead of moving anything into place.
    @Test func aPartBeingWrittenByAnotherTransferIsNeitherResumedNorAppendedTo() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let destination = folder.appendingPathComponent("shared.bin")
                // The first resumes (appends to) a .part of 10,000 bytes: a writer that does not
                // append would write the same bytes at the same offsets and hide the overlap.
                try Data(FixtureServer.expectedBytes(count: 10_000)).write(to: URL(fileURLWithPath: destination.path + ".part"))
                var held = Request(url: server.url("/bytes/100000?chunk=10000&holdAt=30000&gate=first"), destination: destination)
                held.resume = true
                let first = RequestOperation(request: held)
                let (arrived, arrival) = AsyncStream.makeStream(of: Void.self)
                first.downloadProgressHandler = { progress in
                    if progress.bytesTransferred >= 30_000 { arrival.yield(); arrival.finish() }
                }
                let firstResult = Task {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Result<Response, RequestError>, Never>) in
                        first.completionHandler = { continuation.resume(returning: $0) }
                        try! first.start()
                    }
                }
                // 30,000 bytes on disk is the event; nothing more comes until the gate opens.
                for await _ in arrived { break }

                var request = Request(url: server.url("/bytes/100000?chunk=10000"), destination: destination)
                request.resume = true
                let response = try await RequestOperation(request: request).response()
                #expect(response.status.code == 200, "not resumed from the other transfer's .part")
                #expect(server.requests.last?.header("Range") == nil)
                let expected = Data(FixtureServer.expectedBytes(count: 100_000))
                #expect(try Data(contentsOf: destination) == expected)

                server.openGate("first")
                let result = await firstResult.value
                #expect(result.failure != nil, "the first moves nothing into place: \(result)")
                #expect(try Data(contentsOf: destination) == expected, "the finished file is not written to")
                #expect(!FileManager.default.fileExists(atPath: destination.path + ".part"))
            }
        }
    }
}
