import HeapModule

extension RequestQueue {
    /// The queue's ordering and limits, as a value with no I/O and no locks in it.
    ///
    /// Items are identified by `ID` and carry a `Payload`, which the scheduler keeps for its
    /// caller and hands back when an item starts, is listed or leaves: the queue keeps each
    /// operation there, so one dictionary lookup per step finds both the item and its operation.
    /// Pending items wait in a heap ordered by priority, then by
    /// order key — the add sequence number for first-in-first-out, its negation for
    /// last-in-first-out — so adding, starting and cancelling are O(log n). An item whose host
    /// is at its per-host limit is parked under that host until one of its slots frees.
    /// Cancelled pending items are dropped lazily when they reach the top.
    ///
    /// A queue may hold 100,000 pending items, so each costs little: one small record keyed by
    /// its ID (its order key, phase and payload) and one heap entry. An item's host is needed only
    /// while there is a per-host limit, once it starts or is parked; items added without one
    /// get it from `hostOf` at that moment, and only running and parked items keep it. With no
    /// per-host limit (`maxPerHost == 0`, the default) items start without one; when a limit
    /// is set, ``setMaxPerHost(_:hostOf:)`` asks for the hosts of the running items that have
    /// none, so the limit counts them too.
    struct Scheduler<ID: Hashable, Payload>: Sendable where ID: Sendable, Payload: Sendable {
        /// A pending item's place in a heap: priority, then order key, packed in one word so
        /// that the heap compares entries with one comparison and holds two words per entry.
        struct Entry: Comparable {
            /// The priorities an entry can hold, `RequestOperation.Priority`'s raw values among them.
            static var priorities: ClosedRange<Int> { 0...7 }
            /// Order keys are sequence numbers, negated for last-in-first-out: far inside ±2⁶⁰.
            private static var keyBias: Int64 { 1 << 60 }
            private static var keyMask: UInt64 { 1 << 61 - 1 }

            /// `(7 - priority) << 61 | (key + 2⁶⁰)`: smaller is first.
            private var rank: UInt64
            var id: ID

            init(priority: Int, key: Int64, id: ID) {
                precondition(Self.priorities.contains(priority), "a priority out of range")
                rank = UInt64(Self.priorities.upperBound - priority) << 61 | UInt64(key + Self.keyBias)
                self.id = id
            }

            var key: Int64 { Int64(rank & Self.keyMask) - Self.keyBias }

            static func < (lhs: Entry, rhs: Entry) -> Bool { lhs.rank < rhs.rank }
            static func == (lhs: Entry, rhs: Entry) -> Bool { lhs.rank == rhs.rank }
        }

        /// What the scheduler keeps of an item: one word, and the caller's payload. A pending
        /// item's one live heap entry (in `ready` or under its host in `parked`) is the one whose
        /// key is `order`; other entries of its ID are stale. A running item's `order` is its
        /// start sequence number.
        private struct Item {
            /// `order << 2 | hasHost << 1 | isRunning`.
            private var bits: Int64
            var payload: Payload

            init(pendingWithKey key: Int64, payload: Payload) {
                bits = key << 2
                self.payload = payload
            }

            var order: Int64 { bits >> 2 }
            var isRunning: Bool { bits & 1 != 0 }
            /// Whether `hosts` holds the item's host.
            var hasHost: Bool {
                get { bits & 2 != 0 }
                set { bits = newValue ? bits | 2 : bits & ~2 }
            }

            mutating func start(order: Int64) { bits = order << 2 | (bits & 2) | 1 }
        }

        var maxConcurrent = 2
        /// The most running items per host; 0 means no limit. Set with ``setMaxPerHost(_:hostOf:)``.
        private(set) var maxPerHost = 0
        var isSuspended = false
        var lifo = false

        private var items: [ID: Item] = [:]
        /// The hosts of the items that have one: running and parked items, and those added with one.
        private var hosts: [ID: String] = [:]
        private var ready = Heap<Entry>()
        private var parked: [String: Heap<Entry>] = [:]
        /// How many running items with a host (`hasHost`) each host has. While `maxPerHost` is
        /// 0, items start without a host and are not counted here.
        private var runningPerHost: [String: Int] = [:]
        private(set) var runningCount = 0
        private(set) var pendingCount = 0
        private var sequence: Int64 = 0

        var count: Int { runningCount + pendingCount }
        func contains(_ id: ID) -> Bool { items[id] != nil }
        func isRunning(_ id: ID) -> Bool { items[id]?.isRunning ?? false }

        /// Adds a pending item whose host is known. Returns false when `id` is already in the queue.
        @discardableResult
        mutating func add(_ id: ID, payload: Payload, priority: Int, host: String) -> Bool {
            guard add(id, payload: payload, priority: priority) else { return false }
            items[id]!.hasHost = true
            hosts[id] = host
            return true
        }

        /// Adds a pending item whose host ``startNext(hostOf:each:)`` asks for when it needs it.
        /// Returns false when `id` is already in the queue.
        @discardableResult
        mutating func add(_ id: ID, payload: Payload, priority: Int) -> Bool {
            sequence += 1
            let key = lifo ? -sequence : sequence
            if let existing = items.updateValue(Item(pendingWithKey: key, payload: payload), forKey: id) {
                items[id] = existing
                sequence -= 1
                return false
            }
            pendingCount += 1
            ready.insert(Entry(priority: priority, key: key, id: id))
            return true
        }

        /// Removes an item, pending or running; returns whether it was running (its slot is free now).
        @discardableResult
        mutating func remove(_ id: ID) -> Bool {
            take(id)?.wasRunning ?? false
        }

        /// Removes an item, pending or running; returns its payload and whether it was running
        /// (its slot is free now), or nil when `id` is not in the queue.
        mutating func take(_ id: ID) -> (payload: Payload, wasRunning: Bool)? {
            guard let item = items.removeValue(forKey: id) else { return nil }
            let host = item.hasHost ? hosts.removeValue(forKey: id) : nil
            guard item.isRunning else {
                pendingCount -= 1  // its heap entry is dropped when it surfaces
                if pendingCount == 0 { ready = Heap(); parked = [:] }
                return (item.payload, false)
            }
            runningCount -= 1
            if let host {
                let left = (runningPerHost[host] ?? 1) - 1
                runningPerHost[host] = left == 0 ? nil : left
                unpark(host: host)
            }
            return (item.payload, true)
        }

        /// Removes everything; returns the IDs that were in the queue, running ones first.
        mutating func removeAll() -> [ID] {
            let ids = orderedIDs()
            var fresh = Scheduler()
            fresh.maxConcurrent = maxConcurrent
            fresh.maxPerHost = maxPerHost  // nothing runs: no host to ask for
            fresh.isSuspended = isSuspended
            fresh.lifo = lifo
            fresh.sequence = sequence
            self = fresh
            return ids
        }

        /// Picks the items that may start now, marks them running, and calls `each` with each
        /// of them in order. While there is a per-host limit, `hostOf` gives the host of an
        /// item added without one, once, when it starts or parks; with none, it is not called.
        mutating func startNext(hostOf: (ID, Payload) -> String, each: (ID, Payload) -> Void) {
            while !isSuspended, maxConcurrent == 0 || runningCount < maxConcurrent, let entry = ready.popMin() {
                guard let index = items.index(forKey: entry.id) else { continue }  // cancelled while pending
                let item = items.values[index]
                guard !item.isRunning, item.order == entry.key else { continue }  // stale: the ID was added again
                var host: String?
                if item.hasHost {
                    host = hosts[entry.id]!
                } else if maxPerHost > 0 {
                    host = hostOf(entry.id, item.payload)
                    items.values[index].hasHost = true
                    hosts[entry.id] = host
                }
                if let host, maxPerHost > 0, runningPerHost[host, default: 0] >= maxPerHost {
                    parked[host, default: Heap()].insert(entry)
                    continue
                }
                sequence += 1
                items.values[index].start(order: sequence)
                pendingCount -= 1
                runningCount += 1
                if let host { runningPerHost[host, default: 0] += 1 }
                each(entry.id, item.payload)
            }
        }

        /// Sets the per-host limit; 0 means none. Parked items go back to wait for a slot.
        /// When a limit is set where there was none, `hostOf` gives the host of each running
        /// item that started without one, so the limit counts every running item.
        mutating func setMaxPerHost(_ limit: Int, hostOf: (ID, Payload) -> String) {
            let wasUnlimited = maxPerHost == 0
            maxPerHost = max(0, limit)
            if wasUnlimited, maxPerHost > 0, runningCount > 0 {
                let hostless = items.compactMap { $0.value.isRunning && !$0.value.hasHost ? ($0.key, $0.value.payload) : nil }
                for (id, payload) in hostless {
                    let host = hostOf(id, payload)
                    items[id]!.hasHost = true
                    hosts[id] = host
                    runningPerHost[host, default: 0] += 1
                }
            }
            unparkAll()
        }

        /// Running items in the order they started, then pending ones in the order they would start.
        func orderedIDs() -> [ID] {
            ordered { id, _ in id }
        }

        /// `transform` of each item: running items in the order they started, then pending
        /// ones in the order they would start.
        func ordered<T>(_ transform: (ID, Payload) -> T) -> [T] {
            var running: [(Int64, ID, Payload)] = []
            running.reserveCapacity(runningCount)
            for (id, item) in items where item.isRunning {
                running.append((item.order, id, item.payload))
            }
            running.sort { $0.0 < $1.0 }
            // Each pending item has exactly one live entry, in `ready` or parked under its host.
            var pending: [(Entry, Payload)] = []
            pending.reserveCapacity(pendingCount)
            func collect(_ heap: Heap<Entry>) {
                for entry in heap.unordered {
                    if let item = items[entry.id], !item.isRunning, item.order == entry.key { pending.append((entry, item.payload)) }
                }
            }
            collect(ready)
            for heap in parked.values { collect(heap) }
            pending.sort { $0.0 < $1.0 }
            var result: [T] = []
            result.reserveCapacity(running.count + pending.count)
            for (_, id, payload) in running { result.append(transform(id, payload)) }
            for (entry, payload) in pending { result.append(transform(entry.id, payload)) }
            return result
        }

        private mutating func unparkAll() {
            for heap in parked.values {
                for entry in heap.unordered { ready.insert(entry) }
            }
            parked = [:]
        }

        private mutating func unpark(host: String) {
            guard var heap = parked[host] else { return }
            while let entry = heap.popMin() {
                if let item = items[entry.id], !item.isRunning, item.order == entry.key {
                    ready.insert(entry)
                    break
                }
            }
            parked[host] = heap.isEmpty ? nil : heap
        }
    }
}
