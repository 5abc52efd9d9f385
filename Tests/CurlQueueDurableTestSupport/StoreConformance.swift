public import CurlQueueDurable
import Foundation
import Testing

/// A store under test: handles on one store (each as another process would open it) and a
/// way to let time pass for its leases and retention.
public struct StoreHarness: Sendable {
    /// Opens one more handle on the same store (its own connection).
    public var open: @Sendable () async throws -> any JobStore
    /// Lets `duration` pass for the store's clock (moves an injected clock, or sleeps).
    public var advance: @Sendable (Duration) async throws -> Void
    /// The worker TTL the store was opened with.
    public var workerTTL: Duration
    /// The retention the store was opened with.
    public var retention: Duration

    public init(
        open: @escaping @Sendable () async throws -> any JobStore, advance: @escaping @Sendable (Duration) async throws -> Void,
        workerTTL: Duration, retention: Duration
    ) {
        self.open = open
        self.advance = advance
        self.workerTTL = workerTTL
        self.retention = retention
    }
}

/// The contract of ``JobStore``, written once and run against every store: give it a
/// factory that makes a fresh, empty store for each case.
///
/// ```swift
/// @Test(arguments: StoreConformance.cases) func conformance(_ name: String) async throws {
///     try await StoreConformance.run(name) { try await makeEmptyStoreHarness() }
/// }
/// ```
public enum StoreConformance {
    public typealias Factory = @Sendable () async throws -> StoreHarness

    /// The names of the cases, for a parameterized test.
    public static let cases: [String] = Array(all.keys).sorted()

    /// Runs one case against a fresh store from `factory`.
    public static func run(_ name: String, factory: Factory) async throws {
        guard let body = all[name] else {
            Issue.record("no conformance case \(name)")
            return
        }
        try await body(try await factory())
    }

    static let all: [String: @Sendable (StoreHarness) async throws -> Void] = [
        "enqueueClaimFinish": enqueueClaimFinish,
        "fencing": fencing,
        "concurrentClaimers": concurrentClaimers,
        "duplicatePolicies": duplicatePolicies,
        "pause": pause,
        "retryScheduling": retryScheduling,
        "rescue": rescue,
        "handlerRerun": handlerRerun,
        "pruning": pruning,
        "kindsAndOrder": kindsAndOrder,
        "refusedSpecs": refusedSpecs,
        "cancel": cancel,
        "removeFinished": removeFinished,
        "release": release,
        "handlerDeathsAreBounded": handlerDeathsAreBounded,
        "releaseHeldByWorker": releaseHeldByWorker,
        "releaseFailsWhatMayNotBeRepeated": releaseFailsWhatMayNotBeRepeated,
        "health": health,
    ]

    /// The oldest available job's due time and the live workers, by the store's clock.
    static func health(_ harness: StoreHarness) async throws {
        let store = try await harness.open()
        let empty = try await store.health(queue: "q")
        #expect(empty.oldestAvailableSince == nil && empty.workersAlive == 0 && empty.oldestAvailableAge == .zero)
        _ = try await store.enqueue([spec("a")], queue: "q", order: .fifo)
        try await harness.advance(.seconds(2))
        _ = try await store.enqueue([spec("b")], queue: "q", order: .fifo)
        _ = try await store.enqueue([spec("c")], queue: "other", order: .fifo)
        let worker = worker()
        try await store.register(worker)
        let waiting = try await store.health(queue: "q")
        #expect(waiting.workersAlive == 1)
        #expect(waiting.oldestAvailableAge >= .seconds(2), "the older of the two: \(waiting.oldestAvailableAge)")
        #expect(waiting.oldestAvailableAge < .seconds(60))
        _ = try await store.claim(queue: "q", kinds: ["download"], limit: 10, worker: worker.id)
        #expect(try await store.health(queue: "q").oldestAvailableSince == nil, "running jobs do not wait")
        #expect(try await store.health(queue: "other").oldestAvailableSince != nil)
        try await harness.advance(harness.workerTTL + .seconds(1))
        #expect(try await store.health(queue: "q").workersAlive == 0, "its registration expired")
    }

    static func spec(_ path: String, kind: String = "download", priority: JobSpec.Priority = .normal,
                     duplicates: JobSpec.DuplicatePolicy = .replaceEarlier, maxAttempts: Int = 3,
                     method: String = "GET", idempotencyKey: String? = nil) -> JobSpec {
        JobSpec(kind: kind, request: JobRequest(url: "http://127.0.0.1:9/\(path)", method: method, destination: path),
                priority: priority, retry: JobRetryPolicy(maxAttempts: maxAttempts), duplicates: duplicates,
                idempotencyKey: idempotencyKey)
    }

    static func worker(_ node: String = WorkerInfo.localNode) -> WorkerInfo {
        WorkerInfo(node: node, pid: getpid())
    }

    static func enqueueClaimFinish(_ harness: StoreHarness) async throws {
        let store = try await harness.open()
        let results = try await store.enqueue([spec("a"), spec("b")], queue: "q", order: .fifo)
        #expect(results.count == 2)
        let worker = worker()
        try await store.register(worker)
        let claimed = try await store.claim(queue: "q", kinds: ["download"], limit: 10, worker: worker.id)
        #expect(claimed.map(\.record.id) == results.map(\.id))
        #expect(claimed.allSatisfy { $0.record.state == .running && $0.record.attempt == 1 && $0.recorded == nil })
        #expect(try await store.claim(queue: "q", kinds: ["download"], limit: 10, worker: worker.id).isEmpty)
        let result = JobResult(status: 200, bytes: 5, file: "a")
        #expect(try await store.finish(claimed[0].lease, .completed(result)))
        #expect(try await store.finish(claimed[0].lease, .completed(result)) == false, "recorded once")
        #expect(try await store.markHandled(claimed[0].lease))
        #expect(try await store.finish(claimed[1].lease, .failed(reason: "404")))
        let records = try await store.jobs(JobFilter(queue: "q"))
        #expect(records.map(\.state) == [.failed, .completed])
        #expect(records[1].outcome == .completed(result) && records[1].handled)
        #expect(records[0].lastError == "404" && !records[0].handled)
        let counts = try await store.counts(queue: "q")
        #expect(counts == [.completed: 1, .failed: 1])
        try await store.unregister(worker.id)
    }

    static func fencing(_ harness: StoreHarness) async throws {
        let store = try await harness.open()
        _ = try await store.enqueue([spec("a")], queue: "q", order: .fifo)
        let first = worker()
        let second = worker()
        try await store.register(first)
        try await store.register(second)
        let old = try #require(try await store.claim(queue: "q", kinds: ["download"], limit: 1, worker: first.id).first)
        try await store.release([old.lease])
        let new = try #require(try await store.claim(queue: "q", kinds: ["download"], limit: 1, worker: second.id).first)
        #expect(new.lease.job == old.lease.job && new.lease.token != old.lease.token)
        #expect(try await store.finish(old.lease, .completed(JobResult(status: 200, bytes: 1))) == false)
        #expect(try await store.markHandled(old.lease) == false)
        try await store.release([old.lease])  // ignored: not current
        #expect(try await store.jobs(JobFilter()).first?.state == .running)
        #expect(try await store.finish(new.lease, .completed(JobResult(status: 200, bytes: 2))))
        let record = try #require(try await store.jobs(JobFilter()).first)
        #expect(record.outcome == .completed(JobResult(status: 200, bytes: 2)))
    }

    static func concurrentClaimers(_ harness: StoreHarness) async throws {
        let store = try await harness.open()
        let specs = (0..<1000).map { spec("f\($0)") }
        for chunk in stride(from: 0, to: specs.count, by: 250) {
            _ = try await store.enqueue(Array(specs[chunk..<chunk + 250]), queue: "q", order: .fifo)
        }
        let claims = try await withThrowingTaskGroup(of: [JobID].self) { group in
            for _ in 0..<16 {
                group.addTask {
                    let handle = try await harness.open()
                    let me = worker()
                    try await handle.register(me)
                    var mine: [JobID] = []
                    for _ in 0..<1000 {  // bounded: 1,000 jobs, each round claims at least one or stops
                        let batch = try await handle.claim(queue: "q", kinds: ["download"], limit: 8, worker: me.id)
                        if batch.isEmpty { break }
                        for job in batch {
                            #expect(try await handle.finish(job.lease, .completed(JobResult(status: 200, bytes: 0))))
                        }
                        mine += batch.map(\.lease.job)
                    }
                    return mine
                }
            }
            var all: [[JobID]] = []
            for try await ids in group { all.append(ids) }
            return all
        }
        let ids = claims.flatMap { $0 }
        #expect(ids.count == 1000, "each job claimed once")
        #expect(Set(ids).count == 1000, "no job claimed twice")
        #expect(try await store.counts(queue: "q") == [.completed: 1000])
    }

    static func duplicatePolicies(_ harness: StoreHarness) async throws {
        let store = try await harness.open()
        let first = try await store.enqueue([spec("a")], queue: "q", order: .fifo)[0]
        let second = try await store.enqueue([spec("a")], queue: "q", order: .fifo)[0]
        #expect(second == .inserted(second.id, replaced: [first.id]))
        let skipped = try await store.enqueue([spec("a", duplicates: .skipIfPending)], queue: "q", order: .fifo)[0]
        #expect(skipped == .skipped(existing: second.id))
        let allowed = try await store.enqueue([spec("a", duplicates: .allow)], queue: "q", order: .fifo)[0]
        #expect(allowed == .inserted(allowed.id, replaced: []))
        let other = try await store.enqueue([spec("a", duplicates: .skipIfPending)], queue: "other", order: .fifo)[0]
        #expect(other == .inserted(other.id, replaced: []), "keys are per queue")
        var records = try await store.jobs(JobFilter(queue: "q"))
        #expect(records.first { $0.id == first.id }?.state == .cancelled)
        #expect(records.first { $0.id == first.id }?.handled == true, "no handler for a job no worker ran")
        // A running equal job is asked to cancel; its worker sees it at its heartbeat.
        let me = worker()
        try await store.register(me)
        let running = try await store.claim(queue: "q", kinds: ["download"], limit: 10, worker: me.id)
        #expect(Set(running.map(\.record.id)) == [second.id, allowed.id])
        let third = try await store.enqueue([spec("a")], queue: "q", order: .fifo)[0]
        guard case .inserted(_, let replaced) = third else { throw Failure("not inserted: \(third)") }
        #expect(Set(replaced) == [second.id, allowed.id])
        let reply = try await store.heartbeat(me.id, checkpoints: [:])
        #expect(reply == .alive(held: [second.id, allowed.id], cancelRequested: [second.id, allowed.id]))
        records = try await store.jobs(JobFilter(queue: "q", states: [.available]))
        #expect(records.map(\.id) == [third.id])
    }

    static func pause(_ harness: StoreHarness) async throws {
        let store = try await harness.open()
        _ = try await store.enqueue([spec("a")], queue: "q", order: .fifo)
        let me = worker()
        try await store.register(me)
        try await store.setPaused(true, queue: "q")
        #expect(try await store.claim(queue: "q", kinds: ["download"], limit: 5, worker: me.id).isEmpty)
        try await store.setPaused(false, queue: "q")
        #expect(try await store.claim(queue: "q", kinds: ["download"], limit: 5, worker: me.id).count == 1)
    }

    static func retryScheduling(_ harness: StoreHarness) async throws {
        let store = try await harness.open()
        _ = try await store.enqueue([spec("a", maxAttempts: 3)], queue: "q", order: .fifo)
        let me = worker()
        try await store.register(me)
        let kinds: Set<String> = ["download"]
        var job = try #require(try await store.claim(queue: "q", kinds: kinds, limit: 1, worker: me.id).first)
        #expect(try await store.finish(job.lease, .retry(reason: "503", at: Date().addingTimeInterval(-1))))
        job = try #require(try await store.claim(queue: "q", kinds: kinds, limit: 1, worker: me.id).first, "due at once")
        #expect(job.record.attempt == 2 && job.record.lastError == "503")
        #expect(try await store.finish(job.lease, .retry(reason: "429", at: Date().addingTimeInterval(3600))))
        #expect(try await store.claim(queue: "q", kinds: kinds, limit: 1, worker: me.id).isEmpty, "not due")
        #expect(try await store.jobs(JobFilter()).first?.state == .scheduled)
        try await harness.advance(.seconds(3601))
        _ = try await store.maintain()
        job = try #require(try await store.claim(queue: "q", kinds: kinds, limit: 1, worker: me.id).first)
        #expect(job.record.attempt == 3)
        #expect(try await store.finish(job.lease, .retry(reason: "500", at: Date())))
        let record = try #require(try await store.jobs(JobFilter()).first)
        #expect(record.state == .failed && record.lastError == "500", "attempts spent")
        #expect(record.outcome == .failed(reason: "500") && !record.handled, "its handler is still to run")
    }

    static func rescue(_ harness: StoreHarness) async throws {
        let store = try await harness.open()
        let ids = try await store.enqueue(
            [spec("a", maxAttempts: 2), spec("b", maxAttempts: 1), spec("c", method: "POST"),
             spec("d", method: "POST", idempotencyKey: "k1")], queue: "q", order: .fifo
        ).map(\.id)
        // A worker on another machine (its own handle): only its TTL tells it is dead.
        let lostStore = try await harness.open()
        let lost = worker("another-node")
        try await lostStore.register(lost)
        let claimed = try await lostStore.claim(queue: "q", kinds: ["download"], limit: 4, worker: lost.id)
        #expect(claimed.count == 4)
        #expect(try await store.maintain().rescued == 0, "alive within its TTL")
        try await harness.advance(harness.workerTTL + .seconds(1))
        let report = try await store.maintain()
        #expect(report.deadWorkers == [lost.id])
        #expect(report.rescued == 2 && report.failed == 2)
        #expect(try await store.heartbeat(lost.id, checkpoints: [:]) == .declaredDead)
        #expect(try await store.finish(claimed[0].lease, .completed(JobResult(status: 200, bytes: 1))) == false)
        let records = Dictionary(uniqueKeysWithValues: try await store.jobs(JobFilter()).map { ($0.id, $0) })
        #expect(records[ids[0]]?.state == .available)
        #expect(records[ids[1]]?.state == .failed, "attempt budget spent")
        #expect(records[ids[2]]?.state == .failed, "a POST without an idempotency key is not repeated")
        #expect(records[ids[2]]?.lastError == "interrupted after it may have been sent")
        #expect(records[ids[3]]?.state == .available)
        let me = worker()
        try await store.register(me)
        let again = try await store.claim(queue: "q", kinds: ["download"], limit: 10, worker: me.id)
        // The two failed ones come back for their handler only; the two rescued run again.
        #expect(Set(again.filter { $0.recorded != nil }.map(\.lease.job)) == [ids[1], ids[2]])
        #expect(Set(again.filter { $0.recorded == nil }.map(\.lease.job)) == [ids[0], ids[3]])
        #expect(again.first { $0.lease.job == ids[0] }?.record.attempt == 2)
    }

    static func handlerRerun(_ harness: StoreHarness) async throws {
        let store = try await harness.open()
        let id = try await store.enqueue([spec("a")], queue: "q", order: .fifo)[0].id
        let lostStore = try await harness.open()
        let lost = worker("another-node")
        try await lostStore.register(lost)
        let job = try #require(try await lostStore.claim(queue: "q", kinds: ["download"], limit: 1, worker: lost.id).first)
        let result = JobResult(status: 200, bytes: 3)
        #expect(try await lostStore.finish(job.lease, .completed(result)))
        // Dies before its handler returned.
        #expect(try await lostStore.heartbeat(lost.id, checkpoints: [:]) == .alive(held: [id], cancelRequested: []))
        try await harness.advance(harness.workerTTL + .seconds(1))
        _ = try await store.maintain()
        let me = worker()
        try await store.register(me)
        let again = try #require(try await store.claim(queue: "q", kinds: ["download"], limit: 1, worker: me.id).first)
        #expect(again.recorded == .completed(result) && again.record.attempt == 1, "the handler only, not the transfer")
        #expect(try await store.markHandled(job.lease) == false, "the dead worker's lease is stale")
        #expect(try await store.markHandled(again.lease))
        #expect(try await store.claim(queue: "q", kinds: ["download"], limit: 1, worker: me.id).isEmpty)
    }

    static func pruning(_ harness: StoreHarness) async throws {
        let store = try await harness.open()
        _ = try await store.enqueue([spec("a"), spec("b"), spec("c")], queue: "q", order: .fifo)
        let me = worker()
        try await store.register(me)
        let jobs = try await store.claim(queue: "q", kinds: ["download"], limit: 2, worker: me.id)
        for job in jobs { #expect(try await store.finish(job.lease, .completed(JobResult(status: 200, bytes: 0)))) }
        #expect(try await store.markHandled(jobs[0].lease))
        #expect(try await store.maintain().pruned == 0, "within the retention")
        try await harness.advance(harness.retention + .seconds(1))
        _ = try await store.heartbeat(me.id, checkpoints: [:])
        #expect(try await store.maintain().pruned == 1, "final and handled only")
        let left = try await store.jobs(JobFilter()).map(\.id)
        #expect(left.count == 2 && !left.contains(jobs[0].lease.job))
    }

    static func kindsAndOrder(_ harness: StoreHarness) async throws {
        let store = try await harness.open()
        let low = try await store.enqueue([spec("low", priority: .low)], queue: "q", order: .fifo)[0].id
        let fifo = try await store.enqueue([spec("n1"), spec("n2")], queue: "q", order: .fifo).map(\.id)
        let lifo = try await store.enqueue([spec("n3")], queue: "q", order: .lifo)[0].id
        let high = try await store.enqueue([spec("high", priority: .high)], queue: "q", order: .fifo)[0].id
        let upload = try await store.enqueue([spec("u", kind: "upload")], queue: "q", order: .fifo)[0].id
        let me = worker()
        try await store.register(me)
        let claimed = try await store.claim(queue: "q", kinds: ["download"], limit: 10, worker: me.id).map(\.lease.job)
        #expect(claimed == [high, lifo] + fifo + [low])
        #expect(!claimed.contains(upload), "a worker never claims a kind it has no handler for")
        #expect(try await store.claim(queue: "q", kinds: ["upload"], limit: 10, worker: me.id).map(\.lease.job) == [upload])
    }

    static func refusedSpecs(_ harness: StoreHarness) async throws {
        let store = try await harness.open()
        var secret = spec("a")
        secret.request.headerFields = [.init("Authorization", "Bearer x")]
        var escape = spec("b")
        escape.request.destination = "../etc/passwd"
        for bad in [secret, escape] {
            await #expect(throws: JobSpecError.self) {
                _ = try await store.enqueue([spec("ok"), bad], queue: "q", order: .fifo)
            }
        }
        #expect(try await store.jobs(JobFilter()).isEmpty, "all or none")
    }

    static func cancel(_ harness: StoreHarness) async throws {
        let store = try await harness.open()
        let ids = try await store.enqueue([spec("a"), spec("b"), spec("c")], queue: "q", order: .fifo).map(\.id)
        let me = worker()
        try await store.register(me)
        let running = try #require(try await store.claim(queue: "q", kinds: ["download"], limit: 1, worker: me.id).first)
        #expect(try await store.cancel(.id(ids[1])) == CancelResult(cancelled: [ids[1]]))
        #expect(try await store.cancel(.key(spec("a").dedupKey, queue: "q")) == CancelResult(requested: [ids[0]]))
        #expect(try await store.cancel(.queue("q")) == CancelResult(cancelled: [ids[2]], requested: [ids[0]]))
        #expect(try await store.heartbeat(me.id, checkpoints: [:]) == .alive(held: [ids[0]], cancelRequested: [ids[0]]))
        #expect(try await store.finish(running.lease, .cancelled(reason: "cancelled")))
        #expect(try await store.counts(queue: "q") == [.cancelled: 3])
    }

    /// Only final, handled jobs of the queue go, the ones named or all; the rest stay.
    static func removeFinished(_ harness: StoreHarness) async throws {
        let store = try await harness.open()
        let ids = try await store.enqueue([spec("a"), spec("b"), spec("c"), spec("d"), spec("e")], queue: "q", order: .fifo).map(\.id)
        let other = try await store.enqueue([spec("x")], queue: "other", order: .fifo).map(\.id)
        _ = try await store.cancel(.id(other[0]))
        let me = worker()
        try await store.register(me)
        let claimed = try await store.claim(queue: "q", kinds: ["download"], limit: 3, worker: me.id)
        #expect(claimed.map(\.lease.job) == Array(ids[0..<3]))
        #expect(try await store.finish(claimed[0].lease, .completed(JobResult(status: 200, bytes: 1))))
        #expect(try await store.markHandled(claimed[0].lease))
        #expect(try await store.finish(claimed[1].lease, .failed(reason: "gone")))  // final, its handler not run yet
        _ = try await store.cancel(.id(ids[3]))  // cancelled while waiting: handled
        #expect(try await store.removeFinished([ids[2], ids[4]], queue: "q") == [], "running and waiting jobs stay")
        #expect(try await store.removeFinished([ids[1]], queue: "q") == [], "an unhandled outcome stays")
        #expect(try await store.removeFinished([ids[0]], queue: "q") == [ids[0]])
        #expect(try await store.removeFinished(nil, queue: "q") == [ids[3]])
        let left = Set(try await store.jobs(JobFilter()).map(\.id))
        #expect(left == Set([ids[1], ids[2], ids[4], other[0]]), "the other queue's job stays")
    }

    static func release(_ harness: StoreHarness) async throws {
        let store = try await harness.open()
        _ = try await store.enqueue([spec("a")], queue: "q", order: .fifo)
        let me = worker()
        try await store.register(me)
        let job = try #require(try await store.claim(queue: "q", kinds: ["download"], limit: 1, worker: me.id).first)
        let checkpoint = Checkpoint(bytes: 4096, validator: "\"v1\"", node: me.node, bootID: "boot-1")
        _ = try await store.heartbeat(me.id, checkpoints: [job.lease.job: checkpoint])
        try await store.release([job.lease])
        try await store.unregister(me.id)
        let other = worker()
        try await store.register(other)
        let again = try #require(try await store.claim(queue: "q", kinds: ["download"], limit: 1, worker: other.id).first)
        #expect(again.record.attempt == 1, "a release does not count as an attempt")
        #expect(again.record.checkpoint == checkpoint, "kept for the resume")
    }
}

extension StoreConformance {
    /// A recorded outcome whose worker dies in the handler each time: each rescue counts, and
    /// at the attempt budget the job is failed and handled with the handlerFailed reason, not
    /// handed out for ever.
    static func handlerDeathsAreBounded(_ harness: StoreHarness) async throws {
        let store = try await harness.open()
        let id = try await store.enqueue([spec("a", maxAttempts: 2)], queue: "q", order: .fifo)[0].id
        let result = JobResult(status: 200, bytes: 3)
        // The first worker records the outcome and dies in its handler.
        let first = try await harness.open()
        let one = worker("another-node")
        try await first.register(one)
        let job = try #require(try await first.claim(queue: "q", kinds: ["download"], limit: 1, worker: one.id).first)
        #expect(try await first.finish(job.lease, .completed(result)))
        try await harness.advance(harness.workerTTL + .seconds(1))
        var report = try await store.maintain()
        #expect(report.deadWorkers == [one.id] && report.handlerFailed == 0)
        // The second gets the handler only, and dies in it too: two deaths, the budget.
        let second = try await harness.open()
        let two = worker("another-node")
        try await second.register(two)
        let again = try #require(try await second.claim(queue: "q", kinds: ["download"], limit: 1, worker: two.id).first)
        #expect(again.recorded == .completed(result))
        try await harness.advance(harness.workerTTL + .seconds(1))
        report = try await store.maintain()
        #expect(report.deadWorkers == [two.id] && report.handlerFailed == 1)
        let record = try #require(try await store.jobs(JobFilter(ids: [id])).first)
        #expect(record.state == .failed && record.handled, "\(record.state) handled \(record.handled)")
        #expect(record.lastError == JobOutcome.handlerFailedReason)
        #expect(record.outcome == .failed(reason: JobOutcome.handlerFailedReason))
        #expect(record.worker == nil)
        let me = worker()
        try await store.register(me)
        #expect(try await store.claim(queue: "q", kinds: ["download"], limit: 1, worker: me.id).isEmpty,
                "the handler is not run a third time")
    }

    /// `release(_:heldBy:)`: jobs a worker holds in the store but does not run (a claim whose
    /// reply was lost) go back as a release does; another worker's jobs are left alone.
    static func releaseHeldByWorker(_ harness: StoreHarness) async throws {
        let store = try await harness.open()
        let ids = try await store.enqueue([spec("a"), spec("b"), spec("c")], queue: "q", order: .fifo).map(\.id)
        let me = worker()
        try await store.register(me)
        let other = worker()
        try await store.register(other)
        // Claimed on my id from another handle: the reply never reaches "me".
        let outside = try await harness.open()
        let lost = try await outside.claim(queue: "q", kinds: ["download"], limit: 2, worker: me.id)
        #expect(lost.map(\.lease.job) == [ids[0], ids[1]])
        let mine = try #require(try await store.claim(queue: "q", kinds: ["download"], limit: 1, worker: other.id).first)
        #expect(try await outside.finish(lost[1].lease, .completed(JobResult(status: 200, bytes: 1))))
        #expect(try await store.heartbeat(me.id, checkpoints: [:]) == .alive(held: [ids[0], ids[1]], cancelRequested: []))
        try await store.release([ids[0], ids[1], ids[2]], heldBy: me.id)
        #expect(try await store.heartbeat(me.id, checkpoints: [:]) == .alive(held: [], cancelRequested: []))
        #expect(try await store.heartbeat(other.id, checkpoints: [:]) == .alive(held: [ids[2]], cancelRequested: []),
                "another worker's job is not touched")
        let records = Dictionary(uniqueKeysWithValues: try await store.jobs(JobFilter()).map { ($0.id, $0) })
        #expect(records[ids[0]]?.state == .available && records[ids[0]]?.attempt == 0, "not counted")
        #expect(records[ids[1]]?.state == .completed && records[ids[1]]?.handled == false)
        #expect(try await store.finish(lost[0].lease, .completed(JobResult(status: 200, bytes: 1))) == false,
                "the lost claim's lease records nothing")
        let again = try await store.claim(queue: "q", kinds: ["download"], limit: 5, worker: other.id)
        #expect(Set(again.map(\.lease.job)) == [ids[0], ids[1]])
        #expect(again.first { $0.lease.job == ids[1] }?.recorded != nil, "its handler is still to run")
        #expect(try await store.finish(mine.lease, .failed(reason: "x")))
    }
}

/// A failure with a message.
struct Failure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

extension StoreConformance {
    /// A release (a graceful stop) fails a running POST without an idempotency key, as the
    /// rescue does: it may have been sent. One with a key goes back, its attempt not counted.
    static func releaseFailsWhatMayNotBeRepeated(_ harness: StoreHarness) async throws {
        let store = try await harness.open()
        let ids = try await store.enqueue(
            [spec("post", method: "POST"), spec("keyed", method: "POST", idempotencyKey: "k1")], queue: "q", order: .fifo
        ).map(\.id)
        let me = worker()
        try await store.register(me)
        let claimed = try await store.claim(queue: "q", kinds: ["download"], limit: 2, worker: me.id)
        #expect(claimed.count == 2)
        try await store.release(claimed.map(\.lease))
        let records = Dictionary(uniqueKeysWithValues: try await store.jobs(JobFilter()).map { ($0.id, $0) })
        #expect(records[ids[0]]?.state == .failed, "a POST without an idempotency key is not repeated")
        #expect(records[ids[0]]?.lastError == JobOutcome.mayHaveBeenSentReason)
        #expect(records[ids[0]]?.handled == false, "its handler is still to see the failure")
        #expect(records[ids[1]]?.state == .available)
        #expect(records[ids[1]]?.attempt == 0, "a release does not count as an attempt")
        try await store.unregister(me.id)
        let other = worker()
        try await store.register(other)
        let again = try await store.claim(queue: "q", kinds: ["download"], limit: 10, worker: other.id)
        #expect(again.first { $0.lease.job == ids[0] }?.recorded == .failed(reason: JobOutcome.mayHaveBeenSentReason))
        #expect(again.first { $0.lease.job == ids[1] }?.recorded == nil)
    }
}
