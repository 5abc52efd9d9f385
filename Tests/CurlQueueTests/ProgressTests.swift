import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// Progress reports: monotonic, throttled, never NaN, ending at 1.0 when the size is known.
@Suite struct ProgressTests {
    @Test func downloadProgressIsMonotonicAndEndsAtOne() async throws {
        try await withServer { server in
            let operation = RequestOperation(request: Request(url: server.url("/bytes/400000?drip=10&chunk=20000")))
            let reports = LockedBox([TransferProgress]())
            operation.downloadProgressHandler = { progress in reports.update { $0.append(progress) } }
            _ = try await completion(of: operation).get()
            let values = reports.value
            #expect(values.count >= 3)
            #expect(zip(values, values.dropFirst()).allSatisfy { $0.bytesTransferred <= $1.bytesTransferred })
            #expect(values.compactMap(\.fraction).allSatisfy { (0...1).contains($0) })
            #expect(values.last?.fraction == 1.0)
            #expect(values.last?.bytesTransferred == 400_000)
            #expect(values.contains { $0.totalBytes == 400_000 && ($0.fraction ?? 1) < 1 })
        }
    }

    @Test func unknownLengthGivesNoFractionUntilTheEnd() async throws {
        try await withServer { server in
            let operation = RequestOperation(request: Request(url: server.url("/bytes/200000?chunked=1&drip=100&chunk=20000")))
            let reports = LockedBox([TransferProgress]())
            operation.downloadProgressHandler = { progress in reports.update { $0.append(progress) } }
            _ = try await completion(of: operation).get()
            let values = reports.value
            #expect(values.dropLast().allSatisfy { $0.fraction == nil && $0.totalBytes == nil })
            #expect(values.dropLast().contains { $0.bytesTransferred > 0 })
            #expect(values.last == TransferProgress(bytesTransferred: 200_000, totalBytes: 200_000))
        }
    }

    @Test func progressIsThrottled() async throws {
        try await withServer { server in
            let operation = RequestOperation(request: Request(url: server.url("/bytes/2000000?drip=1&chunk=2000")))
            let reports = LockedBox([ContinuousClock.Instant]())
            operation.downloadProgressHandler = { _ in reports.update { $0.append(.now) } }
            let start = ContinuousClock.now
            _ = try await completion(of: operation).get()
            let elapsed = ContinuousClock.now - start
            // About one call per 50 ms, plus the first and the final one.
            let allowed = Int(elapsed / .milliseconds(50)) + 3
            #expect(reports.value.count <= allowed)
        }
    }

    @Test func uploadProgressReachesTheBodySize() async throws {
        try await withServer { server in
            let payload = Data(count: 8 * 1024 * 1024)
            let operation = RequestOperation(request: Request(url: server.url("/echo"), method: .post, body: .bytes(payload)))
            let reports = LockedBox([TransferProgress]())
            operation.uploadProgressHandler = { progress in reports.update { $0.append(progress) } }
            _ = try await completion(of: operation).get()
            let values = reports.value
            #expect(values.last?.bytesTransferred == Int64(payload.count))
            #expect(values.last?.fraction == 1.0)
            #expect(zip(values, values.dropFirst()).allSatisfy { $0.bytesTransferred <= $1.bytesTransferred })
        }
    }

    /// Every call of a download with a Content-Length carries its total: none comes before
    /// the head, when libcurl knows neither the total nor (for a resume) what is on disk.
    @Test func everyCallOfAFreshDownloadCarriesTheTotal() async throws {
        try await withServer { server in
            let operation = RequestOperation(request: Request(url: server.url("/bytes/400000?drip=60&chunk=20000")))
            let reports = LockedBox([TransferProgress]())
            operation.downloadProgressHandler = { progress in reports.update { $0.append(progress) } }
            _ = try await completion(of: operation).get()
            let values = reports.value
            print("fresh download: \(values.map { "\($0.bytesTransferred) of \($0.totalBytes.map(String.init) ?? "nil")" })")
            #expect(values.count >= 3)
            #expect(values.allSatisfy { $0.totalBytes == 400_000 }, "\(values)")
            #expect(zip(values, values.dropFirst()).allSatisfy { $0.bytesTransferred <= $1.bytesTransferred })
            #expect(values.last == TransferProgress(bytesTransferred: 400_000, totalBytes: 400_000))
        }
    }

    /// A resumed download's calls start at the bytes on disk, never go below them, and carry
    /// the whole file's size.
    @Test func aResumedDownloadsCallsStartAtTheBytesOnDisk() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let destination = folder.appendingPathComponent("file")
                try Data(FixtureServer.expectedBytes(count: 200_000)).write(to: part(destination))
                let request = Request(url: server.url("/bytes/400000?drip=60&chunk=20000"), destination: destination, resume: true)
                let operation = RequestOperation(request: request)
                let reports = LockedBox([TransferProgress]())
                operation.downloadProgressHandler = { progress in reports.update { $0.append(progress) } }
                let response = try await completion(of: operation).get()
                #expect(response.status == .partialContent)
                let values = reports.value
                print("resumed download: \(values.map { "\($0.bytesTransferred) of \($0.totalBytes.map(String.init) ?? "nil")" })")
                #expect(values.count >= 3)
                #expect(values.allSatisfy { $0.bytesTransferred >= 200_000 && $0.totalBytes == 400_000 }, "\(values)")
                #expect(zip(values, values.dropFirst()).allSatisfy { $0.bytesTransferred <= $1.bytesTransferred })
                #expect(values.last == TransferProgress(bytesTransferred: 400_000, totalBytes: 400_000))
                #expect(try Data(contentsOf: destination) == Data(FixtureServer.expectedBytes(count: 400_000)))
            }
        }
    }

    /// A chunked body has no total until the end: every call but the last says so, and
    /// counts up to the whole body.
    @Test func everyCallOfAChunkedDownloadHasNoTotalButTheLast() async throws {
        try await withServer { server in
            // Ten chunks 100 ms apart: calls are at least 50 ms apart, so several come even when
            // a loaded machine delivers two chunks in one turn (10 ms apart, 2 calls were seen).
            let operation = RequestOperation(request: Request(url: server.url("/bytes/200000?chunked=1&drip=100&chunk=20000")))
            let reports = LockedBox([TransferProgress]())
            operation.downloadProgressHandler = { progress in reports.update { $0.append(progress) } }
            _ = try await completion(of: operation).get()
            let values = reports.value
            print("chunked download: \(values.map { "\($0.bytesTransferred) of \($0.totalBytes.map(String.init) ?? "nil")" })")
            #expect(values.count >= 3)
            #expect(values.dropLast().allSatisfy { $0.totalBytes == nil && $0.bytesTransferred <= 200_000 })
            #expect(zip(values, values.dropFirst()).allSatisfy { $0.bytesTransferred <= $1.bytesTransferred })
            #expect(values.last == TransferProgress(bytesTransferred: 200_000, totalBytes: 200_000))
        }
    }

    /// An upload is reported before the response head (the download is not).
    @Test func anUploadIsReportedBeforeTheResponseHead() async throws {
        try await withServer { server in
            let payload = Data(count: 4 * 1024 * 1024)
            // The answer waits 500 ms after the whole body arrived.
            let operation = RequestOperation(request: Request(url: server.url("/echo?delay=500"), method: .post, body: .bytes(payload)))
            let uploads = LockedBox([TransferProgress]())
            let downloads = LockedBox([TransferProgress]())
            operation.uploadProgressHandler = { progress in uploads.update { $0.append(progress) } }
            operation.downloadProgressHandler = { progress in downloads.update { $0.append(progress) } }
            _ = try await completion(of: operation).get()
            #expect(uploads.value.contains { $0.bytesTransferred == Int64(payload.count) && $0.totalBytes == Int64(payload.count) })
            #expect(downloads.value.allSatisfy { $0.totalBytes != nil }, "\(downloads.value)")
        }
    }

    @Test func zeroAndUnknownTotalsNeverDivideByZero() {
        #expect(TransferProgress(bytesTransferred: 10, totalBytes: nil).fraction == nil)
        #expect(TransferProgress(bytesTransferred: 0, totalBytes: 0).fraction == 1)
        #expect(TransferProgress(bytesTransferred: 50, totalBytes: 10).fraction == 1)
        #expect(TransferProgress(bytesTransferred: 5, totalBytes: 10).fraction == 0.5)
    }
}
