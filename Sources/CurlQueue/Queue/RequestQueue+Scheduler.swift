import HeapModule

extension RequestQueue {
    /// The queue's ordering and limits, as a value with no I/O and no locks in it.
    ///
    /// Items are identified by `ID`. Pending items wait in a heap ordered by priority, then by
    /// order key — the add sequence number for first-in-first-out, its negation for
    /// last-in-first-out — so adding, starting and cancelling are O(log n). An item whose host
    /// is at its per-host limit is parked under that host until one of its slots frees.
    /// Cancelled pending items are dropped lazily when they reach the top.
    struct Scheduler<ID: Hashable> {
        struct Entry: Comparable {
            var priority: Int
            var key: Int64
            var id: ID

            static func < (lhs: Entry, rhs: Entry) -> Bool {
                if lhs.priority != rhs.priority { return lhs.priority > rhs.priority }
                return lhs.key < rhs.key
            }

            static func == (lhs: Entry, rhs: Entry) -> Bool { lhs.priority == rhs.priority && lhs.key == rhs.key }
        }

        private enum Phase {
            case pending(Entry)
            case running(order: Int64)
        }

        private struct Item {
            var host: String
            var phase: Phase
        }

        var maxConcurrent = 2
        var maxPerHost = 0 {
            didSet { unparkAll() }
        }
        var isSuspended = false
        var lifo = false

        private var items: [ID: Item] = [:]
        private var ready = Heap<Entry>()
        private var parked: [String: Heap<Entry>] = [:]
        private var runningPerHost: [String: Int] = [:]
        private(set) var runningCount = 0
        private(set) var pendingCount = 0
        private var sequence: Int64 = 0

        var count: Int { runningCount + pendingCount }
        func contains(_ id: ID) -> Bool { items[id] != nil }
        func isRunning(_ id: ID) -> Bool {
            if case .running = items[id]?.phase { return true }
            return false
        }

        /// Adds a pending item. Returns false when `id` is already in the queue.
        @discardableResult
        mutating func add(_ id: ID, priority: Int, host: String) -> Bool {
            guard items[id] == nil else { return false }
            sequence += 1
            let entry = Entry(priority: priority, key: lifo ? -sequence : sequence, id: id)
            items[id] = Item(host: host, phase: .pending(entry))
            pendingCount += 1
            ready.insert(entry)
            return true
        }

        /// Removes an item, pending or running; returns whether it was running (its slot is free now).
        @discardableResult
        mutating func remove(_ id: ID) -> Bool {
            guard let item = items.removeValue(forKey: id) else { return false }
            switch item.phase {
            case .pending:
                pendingCount -= 1  // its heap entry is dropped when it surfaces
                if pendingCount == 0 { ready = Heap(); parked = [:] }
                return false
            case .running:
                runningCount -= 1
                let left = (runningPerHost[item.host] ?? 1) - 1
                runningPerHost[item.host] = left == 0 ? nil : left
                unpark(host: item.host)
                return true
            }
        }

        /// Removes everything; returns the IDs that were in the queue, running ones first.
        mutating func removeAll() -> [ID] {
            let ids = orderedIDs()
            var fresh = Scheduler()
            fresh.maxConcurrent = maxConcurrent
            fresh.maxPerHost = maxPerHost
            fresh.isSuspended = isSuspended
            fresh.lifo = lifo
            fresh.sequence = sequence
            self = fresh
            return ids
        }

        /// Picks the items that may start now, marks them running, and returns them in order.
        mutating func nextToStart() -> [ID] {
            var started: [ID] = []
            while !isSuspended, maxConcurrent == 0 || runningCount < maxConcurrent, let entry = ready.popMin() {
                guard let item = items[entry.id], case .pending(let pending) = item.phase, pending == entry else {
                    continue  // cancelled while pending
                }
                if maxPerHost > 0, runningPerHost[item.host, default: 0] >= maxPerHost {
                    parked[item.host, default: Heap()].insert(entry)
                    continue
                }
                sequence += 1
                items[entry.id]!.phase = .running(order: sequence)
                pendingCount -= 1
                runningCount += 1
                runningPerHost[item.host, default: 0] += 1
                started.append(entry.id)
            }
            return started
        }

        /// Running items in the order they started, then pending ones in the order they would start.
        func orderedIDs() -> [ID] {
            var running: [(Int64, ID)] = []
            var pending: [Entry] = []
            for (id, item) in items {
                switch item.phase {
                case .running(let order): running.append((order, id))
                case .pending(let entry): pending.append(entry)
                }
            }
            running.sort { $0.0 < $1.0 }
            return running.map(\.1) + pending.sorted().map(\.id)
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
                if let item = items[entry.id], case .pending(let pending) = item.phase, pending == entry {
                    ready.insert(entry)
                    break
                }
            }
            parked[host] = heap.isEmpty ? nil : heap
        }
    }
}
