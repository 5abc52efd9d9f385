import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// `Request.maxReceiveSpeed` and `Request.sharedReceiveLimit`, through the library: a limited
/// body of N bytes takes at least about N / rate (a lower bound only; accuracy is measured in
/// Benchmarks/rate.py), and a shared limit holds for the transfers together.
@Suite struct ReceiveSpeedLimitTests {
    private func run(_ requests: [Request]) async -> ([Result<Response, RequestError>], Double) {
        let start = ContinuousClock.now
        let results = await withTaskGroup(of: Result<Response, RequestError>.self) { group in
            for request in requests {
                group.addTask {
                    let operation = RequestOperation(request: request)
                    return await withCheckedContinuation { continuation in
                        operation.completionHandler = { continuation.resume(returning: $0) }
                        try! operation.start()
                    }
                }
            }
            var results: [Result<Response, RequestError>] = []
            for await result in group { results.append(result) }
            return results
        }
        let elapsed = ContinuousClock.now - start
        return (results, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }

    @Test func aLimitedBodyInMemoryTakesAtLeastItsSizeOverTheRate() async throws {
        try await withServer { server in
            // 1 MiB at 384 KiB/s: 2.7 s; the first read of 48 KiB goes at once.
            var request = Request(url: server.url("/bytes/1048576"))
            request.maxReceiveSpeed = 384 * 1024
            let (results, seconds) = await run([request])
            print("1 MiB at 384 KiB/s: \(seconds) s")
            let response = try results[0].get()
            #expect(response.status.code == 200 && response.body.count == 1_048_576)
            #expect(seconds >= 2.2, "took \(seconds) s")
        }
    }

    @Test func aSharedLimitHoldsForTheTransfersTogether() async throws {
        try await withServer { server in
            // Three transfers of 512 KiB share 512 KiB/s: 3 s together, where each alone is
            // allowed the whole 512 KiB/s (1 s).
            let limit = SharedRateLimit(bytesPerSecond: 512 * 1024)
            let requests = (1...3).map { number in
                var request = Request(url: server.url("/bytes/524288?n=\(number)"))
                request.sharedReceiveLimit = limit
                return request
            }
            let (results, seconds) = await run(requests)
            print("3 × 512 KiB sharing 512 KiB/s: \(seconds) s")
            for result in results {
                let response = try result.get()
                #expect(response.body.count == 524_288)
            }
            #expect(seconds >= 2.4, "took \(seconds) s")
        }
    }
}
