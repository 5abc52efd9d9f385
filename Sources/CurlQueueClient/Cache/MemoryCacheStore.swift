import CurlQueue

/// A response cache store in memory: least recently used entries go first once the entries'
/// bytes pass a limit.
///
/// Safe to use from any thread. An entry larger than the whole limit is not stored.
public final class MemoryCacheStore: ResponseCacheStore {
    private let entries: Locked<LRU>

    /// The most bytes (bodies plus header fields, roughly) the store holds.
    public let byteLimit: Int

    /// Random, one per store (``ResponseCacheStore/partitionSecret``).
    public let partitionSecret = CachePartition.randomSecret()

    /// Creates an empty store that holds at most `byteLimit` bytes.
    public init(byteLimit: Int = 32 * 1024 * 1024) {
        self.byteLimit = max(0, byteLimit)
        entries = Locked(LRU())
    }

    /// The bytes held now.
    public var byteCount: Int { entries.withLock { $0.bytes } }

    /// The number of entries held now.
    public var count: Int { entries.withLock { $0.nodes.count - $0.free.count } }

    public func cachedResponse(forKey key: String) -> CachedResponse? {
        entries.withLock { lru in
            guard let index = lru.index[key] else { return nil }
            lru.moveToFront(index)
            return lru.nodes[index].value
        }
    }

    public func store(_ response: CachedResponse, forKey key: String) {
        let cost = response.byteCost + key.utf8.count
        // What is evicted is released after the lock, outside it.
        let evicted: [CachedResponse] = entries.withLock { lru in
            var evicted: [CachedResponse] = []
            if let index = lru.index[key], let old = lru.remove(index) { evicted.append(old) }
            guard cost <= byteLimit else { return evicted }
            while lru.bytes + cost > byteLimit, let last = lru.tail, let old = lru.remove(last) {
                evicted.append(old)
            }
            lru.insertAtFront(key: key, value: response, cost: cost)
            return evicted
        }
        _ = evicted
    }

    public func removeCachedResponse(forKey key: String) {
        let removed = entries.withLock { lru in lru.index[key].flatMap { lru.remove($0) } }
        _ = removed
    }

    public func removeAll() {
        let old = entries.withLock { lru in
            let old = lru
            lru = LRU()
            return old
        }
        _ = old
    }
}

/// A doubly linked list in an array, most recently used first, with a key index.
private struct LRU {
    struct Node {
        var key: String
        var value: CachedResponse?
        var cost: Int
        var previous: Int?
        var next: Int?
    }

    var nodes: [Node] = []
    var free: [Int] = []
    var index: [String: Int] = [:]
    var head: Int?
    var tail: Int?
    var bytes = 0

    mutating func insertAtFront(key: String, value: CachedResponse, cost: Int) {
        let node = Node(key: key, value: value, cost: cost, previous: nil, next: head)
        let slot: Int
        if let reused = free.popLast() {
            nodes[reused] = node
            slot = reused
        } else {
            nodes.append(node)
            slot = nodes.count - 1
        }
        if let head { nodes[head].previous = slot }
        head = slot
        if tail == nil { tail = slot }
        index[key] = slot
        bytes += cost
    }

    /// Unlinks the node at `slot` and returns its value.
    mutating func remove(_ slot: Int) -> CachedResponse? {
        unlink(slot)
        let value = nodes[slot].value
        index[nodes[slot].key] = nil
        bytes -= nodes[slot].cost
        nodes[slot] = Node(key: "", value: nil, cost: 0, previous: nil, next: nil)
        free.append(slot)
        return value
    }

    mutating func moveToFront(_ slot: Int) {
        guard head != slot else { return }
        unlink(slot)
        nodes[slot].next = head
        nodes[slot].previous = nil
        if let head { nodes[head].previous = slot }
        head = slot
        if tail == nil { tail = slot }
    }

    private mutating func unlink(_ slot: Int) {
        let previous = nodes[slot].previous
        let next = nodes[slot].next
        if let previous { nodes[previous].next = next } else { head = next }
        if let next { nodes[next].previous = previous } else { tail = previous }
        nodes[slot].previous = nil
        nodes[slot].next = nil
    }
}
