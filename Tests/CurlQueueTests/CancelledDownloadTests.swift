import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// What a library-level cancel leaves on disk: the `.part`, holding exactly the bytes that
/// arrived, and a resume that asks for the rest.
@Suite struct CancelledDownloadTests {
    /// The server holds the body after 30,000 of 100,000 bytes; once progress shows all 30,000
    /// arrived, the operation is cancelled. The `.part` holds exactly those bytes, and no file
    /// stands under the final name. A resume then sends `Range: bytes=30000-` and completes the
    /// file byte for byte.
    @Test func aCancelMidBodyKeepsExactlyTheBytesThatArrivedAndAResumeCompletesThem() async throws {
        try await withServer { server in
            let folder = try makeTemporaryFolder()
            defer { try? FileManager.default.removeItem(at: folder) }
            let destination = folder.appendingPathComponent("held.bin")
            let part = URL(fileURLWithPath: destination.path + ".part")
            let url = server.url("/bytes/100000?chunk=10000&holdAt=30000&gate=held")
            let operation = RequestOperation(request: Request(url: url, destination: destination))

            // Progress reaching 30,000 bytes is the event; nothing more can come until the gate opens.
            let arrived = LockedBox(false)
            let result: Result<Response, RequestError> = await withCheckedContinuation { continuation in
                operation.downloadProgressHandler = { progress in
                    guard progress.bytesTransferred >= 30_000, !arrived.update({ let was = $0; $0 = true; return was }) else { return }
                    operation.cancel()
                }
                operation.completionHandler = { continuation.resume(returning: $0) }
                try! operation.start()
            }
            #expect(result.failure == .cancelled, "\(result)")
            #expect(arrived.value)
            #expect(!FileManager.default.fileExists(atPath: destination.path))
            #expect(try Data(contentsOf: part) == Data(FixtureServer.expectedBytes(count: 30_000)))

            server.openGate("held")
            var resume = Request(url: url, destination: destination)
            resume.resume = true
            let response = try await RequestOperation(request: resume).response()
            #expect(response.status.code == 206)
            #expect(server.requests.last?.header("Range") == "bytes=30000-")
            #expect(try Data(contentsOf: destination) == Data(FixtureServer.expectedBytes(count: 100_000)))
            #expect(!FileManager.default.fileExists(atPath: part.path))
        }
    }
}
