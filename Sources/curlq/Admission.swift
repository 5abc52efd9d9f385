import CurlQueue
import CurlQueueDownloads
import Foundation
import HeapModule

/// Decides which file of the batch starts next, so that curlq hands the `RequestQueue` only
/// operations that can start at once: the queue then holds at most `-j` operations, and a
/// batch of 10,000 files costs 10,000 small ``Job`` values, not 10,000 operations.
///
/// The order is the one the queue itself would follow with the whole batch added at once:
/// priority first (high, normal, low), then the position in the input — first listed first
/// (`--order fifo`) or last listed first (`--order lifo`) — skipping the files whose host is at
/// its `--per-host` limit until one of its transfers ends. Pure: no I/O, no clock.
///
/// What the queue cannot do, and the reason this type exists: hold a batch without an operation
/// per file. An operation and its `Request` are built only when ``take()`` starts the file, and
/// let go of when it ends, so a batch's memory is its list of jobs, whatever its size; the
/// limits themselves (`-j`, `--per-host`, priorities, order) are also set on the queue, which
/// enforces them for the operations it is handed.
struct Admission {
    /// `origin` of each job, as a small integer.
    private let origins: [Int]
    /// Per origin, its job indices in start order, and how far they have been taken.
    private var waiting: [[Int]]
    private var next: [Int]
    private var running: [Int]
    /// The rank (start order) of each job.
    private let rank: [Int]
    private let perHost: Int
    /// Heads of the origins that have jobs waiting and a free slot, by rank.
    private var heads = Heap<Head>()

    /// - Parameters:
    ///   - jobs: `(index, origin, priority)` of the jobs to run; indices are `0..<count`
    ///     of the whole batch, any subset of them.
    ///   - count: The size of the whole batch.
    ///   - lastInFirstOut: `--order lifo`.
    ///   - perHost: The most running jobs per origin; 0 for no limit.
    init(jobs: [(index: Int, origin: String, priority: InputPriority)], count: Int, lastInFirstOut: Bool, perHost: Int) {
        func weight(_ priority: InputPriority) -> Int {
            switch priority {
            case .high: 0
            case .normal: 1
            case .low: 2
            }
        }
        let sorted = jobs.sorted { a, b in
            if a.priority != b.priority { return weight(a.priority) < weight(b.priority) }
            return lastInFirstOut ? a.index > b.index : a.index < b.index
        }
        var rank = Array(repeating: -1, count: count)
        var originIDs: [String: Int] = [:]
        var origins = Array(repeating: -1, count: count)
        var waiting: [[Int]] = []
        for (position, job) in sorted.enumerated() {
            rank[job.index] = position
            let id: Int
            if let known = originIDs[job.origin] {
                id = known
            } else {
                id = waiting.count
                originIDs[job.origin] = id
                waiting.append([])
            }
            origins[job.index] = id
            waiting[id].append(job.index)
        }
        self.rank = rank
        self.origins = origins
        self.waiting = waiting
        self.next = Array(repeating: 0, count: waiting.count)
        self.running = Array(repeating: 0, count: waiting.count)
        self.perHost = max(0, perHost)
        for origin in waiting.indices { heads.insert(Head(rank: rank[waiting[origin][0]], origin: origin)) }
    }

    /// Jobs not started yet.
    var pendingCount: Int { zip(waiting, next).reduce(0) { $0 + $1.0.count - $1.1 } }

    /// The next job to start, now counted as running; nil when every waiting job's host is
    /// at its limit, or none is waiting.
    mutating func take() -> Int? {
        guard let head = heads.popMin() else { return nil }
        let origin = head.origin
        let index = waiting[origin][next[origin]]
        next[origin] += 1
        running[origin] += 1
        pushHeadIfReady(origin)
        return index
    }

    /// A job that was taken has ended: its host has a free slot again.
    mutating func finished(_ index: Int) {
        let origin = origins[index]
        guard origin >= 0, running[origin] > 0 else { return }
        let wasFull = perHost > 0 && running[origin] >= perHost
        running[origin] -= 1
        if wasFull { pushHeadIfReady(origin) }
    }

    /// Empties the waiting lists (on interruption) and returns what they held, in order.
    mutating func takeAllWaiting() -> [Int] {
        var left: [(Int, Int)] = []
        for origin in waiting.indices {
            for index in waiting[origin][next[origin]...] { left.append((rank[index], index)) }
            next[origin] = waiting[origin].count
        }
        heads = Heap<Head>()
        return left.sorted { $0.0 < $1.0 }.map(\.1)
    }

    private mutating func pushHeadIfReady(_ origin: Int) {
        guard next[origin] < waiting[origin].count, perHost == 0 || running[origin] < perHost else { return }
        heads.insert(Head(rank: rank[waiting[origin][next[origin]]], origin: origin))
    }

    /// The origin a per-host limit counts by: the queue's own, so that a file admitted here is
    /// never one the queue would park at its host's limit.
    static func origin(of url: URL) -> String { RequestQueue.origin(of: url) }
}

/// The head of an origin with jobs waiting and a free slot: ordered by the rank of its first
/// waiting job.
private struct Head: Comparable {
    var rank: Int
    var origin: Int
    static func < (a: Head, b: Head) -> Bool { a.rank < b.rank }
}
