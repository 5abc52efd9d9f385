import Dispatch

extension ResponseCache {
    /// Where a store that waits for the disk (``ResponseCacheStore/blocksOnIO``) is called
    /// from an async caller: Dispatch threads, never the Swift concurrency pool, which has one
    /// thread per core and stalls every task of the process while one waits for a disk.
    /// Reads run side by side; a write runs alone, after the calls before it and before those
    /// after it (a barrier), so a lookup always sees the writes made before it.
    struct StoreCalls: Sendable {
        let store: any ResponseCacheStore
        private let queue: DispatchQueue?

        init(_ store: any ResponseCacheStore) {
            self.store = store
            queue = store.blocksOnIO ? DispatchQueue(label: "CurlQueueClient.ResponseCache.store", qos: .utility, attributes: .concurrent) : nil
        }

        func cachedResponse(forKey key: String) async -> CachedResponse? {
            guard let queue else { return store.cachedResponse(forKey: key) }
            let store = self.store
            return await withCheckedContinuation { continuation in
                queue.async { continuation.resume(returning: store.cachedResponse(forKey: key)) }
            }
        }

        /// A store or remove, ordered with every other call; returns once it is made.
        func write(_ change: @escaping @Sendable (any ResponseCacheStore) -> Void) async {
            guard let queue else { return change(store) }
            let store = self.store
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                queue.async(flags: .barrier) {
                    change(store)
                    continuation.resume()
                }
            }
        }
    }
}
