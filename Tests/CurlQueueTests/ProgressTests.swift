import CurlQueue
import CurlQueueTestSupport
import Foundation
import Testing

/// Progress reports: monotonic, throttled, never NaN, ending at 1.0 when the size is known.
@Suite struct ProgressTests {
    @Test func downloadProgressIsMonotonicAndEndsAtOne() async throws {
        try await withServer { server in
            let operation = RequestOperation(request: Request(url: server.url("/bytes/400000?drip=10&chunk=20000")))
            let reports = Box([TransferProgress]())
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
            let operation = RequestOperation(request: Request(url: server.url("/bytes/200000?chunked=1&drip=10&chunk=20000")))
            let reports = Box([TransferProgress]())
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
            let reports = Box([ContinuousClock.Instant]())
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
            let reports = Box([TransferProgress]())
            operation.uploadProgressHandler = { progress in reports.update { $0.append(progress) } }
            _ = try await completion(of: operation).get()
            let values = reports.value
            #expect(values.last?.bytesTransferred == Int64(payload.count))
            #expect(values.last?.fraction == 1.0)
            #expect(zip(values, values.dropFirst()).allSatisfy { $0.bytesTransferred <= $1.bytesTransferred })
        }
    }

    @Test func zeroAndUnknownTotalsNeverDivideByZero() {
        #expect(TransferProgress(bytesTransferred: 10, totalBytes: nil).fraction == nil)
        #expect(TransferProgress(bytesTransferred: 0, totalBytes: 0).fraction == 1)
        #expect(TransferProgress(bytesTransferred: 50, totalBytes: 10).fraction == 1)
        #expect(TransferProgress(bytesTransferred: 5, totalBytes: 10).fraction == 0.5)
    }
}
