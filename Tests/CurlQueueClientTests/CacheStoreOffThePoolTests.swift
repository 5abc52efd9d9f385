import CurlQueue
import CurlQueueClient
import Dispatch
import Foundation
import Synchronization
import Testing

/// A store that waits for a disk is called off the Swift concurrency pool: a cache lookup
/// blocked on I/O holds a Dispatch thread, not one of the pool's (one per core), so many slow
/// lookups at once do not stall every other task of the process.
@Suite struct CacheStoreOffThePoolTests {
    /// Blocks every lookup until the test opens it, and counts the lookups that got in.
    final class SlowStore: ResponseCacheStore {
        let entered = Mutex(0)
        let gate = DispatchSemaphore(value: 0)
        let inside: AsyncStream<Int>
        private let report: AsyncStream<Int>.Continuation
        let blocksOnIO = true

        init() { (inside, report) = AsyncStream.makeStream() }

        func cachedResponse(forKey key: String) -> CachedResponse? {
            report.yield(entered.withLock { $0 += 1; return $0 })
            gate.wait()
            return nil
        }
        func store(_ response: CachedResponse, forKey key: String) {}
        func removeCachedResponse(forKey key: String) {}
        func removeAll() {}
    }

    @Test func lookupsThatWaitForTheDiskDoNotHoldThePool() async throws {
        let store = SlowStore()
        let cache = ResponseCache(store: store)
        // More lookups than the pool has threads: on the pool, the ones past its width could
        // never start while the first ones wait, and neither could this test.
        let count = ProcessInfo.processInfo.activeProcessorCount + 2
        // If they cannot all get in, open the gate from outside the pool after 60 s, so that
        // the test ends (and fails) instead of hanging.
        let timedOut = Mutex(false)
        DispatchQueue.global().asyncAfter(deadline: .now() + 60) {
            timedOut.withLock { $0 = true }
            for _ in 0..<count { store.gate.signal() }
        }
        let lookups = (0..<count).map { index in
            Task {
                let request = Request(url: URL(string: "http://127.0.0.1:9/\(index)")!)
                return try? await cache.response(for: request, policy: .returnCacheDontLoad) { _ in
                    throw CancellationError()
                }
            }
        }
        var inside = 0
        for await entered in store.inside {
            inside = entered
            if entered == count { break }
        }
        #expect(inside == count)
        #expect(!timedOut.withLock { $0 }, "all \(count) lookups were waiting at once before the deadline")
        for _ in 0..<count { store.gate.signal() }
        for lookup in lookups { #expect(await lookup.value == nil, "a miss") }
    }
}
