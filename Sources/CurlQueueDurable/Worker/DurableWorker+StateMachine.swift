/// The worker's decisions, as a value: events in, actions out, no I/O and no clock of its
/// own (every event that depends on time carries the instant), so tests drive it step by
/// step. ``DurableWorker`` performs the actions and feeds back their results.
struct WorkerStateMachine {
    typealias Instant = ContinuousClock.Instant

    struct Settings {
        /// The most jobs held at once: the local `RequestQueue`'s free slots.
        var capacity: Int
        var heartbeatInterval: Duration
        /// No successful heartbeat for this long (from when the last good one was sent):
        /// every transfer is stopped, nothing more is recorded. Shorter than the store's TTL.
        var selfFence: Duration
        var maintenanceInterval: Duration
        /// How long a claim that found nothing waits before the next (a wakeup comes sooner).
        var pollInterval: Duration
        /// How long, past the drain deadline, stopping waits for the store to take the writes
        /// still owed (outcomes, the release). Then the worker stops without them.
        var storeGrace: Duration = .seconds(10)
    }

    enum Phase: Equatable {
        case running
        /// Stopped claiming; transfers run until the deadline.
        case draining(deadline: Instant)
        /// The leases of unfinished jobs are being given back.
        case releasing
        case stopped
    }

    /// Why a transfer was cancelled by the worker.
    enum Intent: Equatable {
        /// The store asked (a cancel, a newer equal job): record `.cancelled`.
        case cancelRequested
        /// Stopping: give the job back, keep its `.part`.
        case release
        /// The lease is lost: record nothing.
        case abandon
    }

    enum Stage: Equatable {
        case transfer(intent: Intent?)
        /// `finish` sent (or to send again, when `inFlight` is false).
        case finishing(JobOutcome, inFlight: Bool)
        case handling
        case marking
    }

    struct Held: Equatable {
        var lease: Lease
        var stage: Stage
        var claimedAt: Instant
    }

    enum Action: Equatable {
        case claim(limit: Int)
        case startTransfer(ClaimedJob)
        case cancelTransfer(JobID)
        case finish(Lease, JobOutcome)
        case runHandler(JobID, JobOutcome)
        case markHandled(Lease)
        case heartbeat(jobs: [JobID])
        case maintain
        case release([Lease])
        /// Gives back jobs this worker abandoned while the store still counts them as its own
        /// (a self-fence the store did not follow): unlike ``release(_:)``, not a step of stopping.
        case giveBack([Lease])
        /// Give back jobs the store says this worker holds but it does not run (a claim whose
        /// reply was lost).
        case releaseUnknown([JobID])
        case reregister
        /// Stopping went past the drain deadline plus the store grace with these jobs' writes
        /// not made (their outcome unrecorded or their lease not given back: the store was
        /// unreachable). Nothing more is sent for them; they stay leased until the store
        /// rescues them, then run again. Followed by ``stopped``.
        case gaveUp([JobID])
        case stopped
    }

    let settings: Settings
    private(set) var phase = Phase.running
    private(set) var held: [JobID: Held] = [:]
    private var claiming = false
    private var nextClaim: Instant
    private var heartbeatSentAt: Instant?
    private var lastGoodHeartbeat: Instant
    private var nextMaintenance: Instant
    private var releasing: [Lease] = []
    /// Jobs given up (their transfer cancelled, nothing more recorded) on a self-fence or a
    /// heartbeat that no longer listed them, whose lease the store may still count as this
    /// worker's. A self-fence the store did not follow (the process was stopped, or the store
    /// was away for less than its TTL) would otherwise leave them `running` under a live worker
    /// for ever: no rescue takes a live worker's jobs. The next heartbeat that says they are
    /// still held gives them back, once their transfer has ended.
    private var abandoned: [JobID: Lease] = [:]
    /// Jobs a heartbeat said this worker holds, unknown to it while a claim was in flight: the
    /// claim's reply may bring them. Once it is in, those it did not bring are given back.
    private var suspects: Set<JobID> = []
    private var deadlinePassed = false
    /// When stopping gives up on the store: the drain deadline plus the store grace.
    private var giveUpAt: Instant?
    /// The leases of the release in flight (phase `.releasing`).
    private var releaseSent: [Lease] = []

    init(settings: Settings, now: Instant) {
        self.settings = settings
        nextClaim = now
        lastGoodHeartbeat = now
        nextMaintenance = now
    }

    var isStopped: Bool { phase == .stopped }

    // MARK: Events

    /// Time passed: heartbeat, maintenance, polling, self-fencing, the drain deadline.
    mutating func tick(now: Instant) -> [Action] {
        var actions: [Action] = []
        if phase == .stopped { return actions }
        if let giveUpAt, now >= giveUpAt { return giveUp() }
        if now - lastGoodHeartbeat > settings.selfFence, heartbeatSentAt != nil || !held.isEmpty {
            actions += abandonAll()
        }
        if heartbeatSentAt == nil, now - lastGoodHeartbeat >= settings.heartbeatInterval || now - lastGoodHeartbeat > settings.selfFence {
            heartbeatSentAt = now
            actions.append(.heartbeat(jobs: held.keys.sorted()))
        }
        if phase == .running, now >= nextMaintenance {
            nextMaintenance = now + settings.maintenanceInterval
            actions.append(.maintain)
        }
        for (id, job) in held.sorted(by: { $0.key < $1.key }) {
            if case .finishing(let outcome, inFlight: false) = job.stage {
                held[id]?.stage = .finishing(outcome, inFlight: true)
                actions.append(.finish(job.lease, outcome))
            }
        }
        if case .draining(let deadline) = phase, now >= deadline {
            deadlinePassed = true
            for (id, job) in held.sorted(by: { $0.key < $1.key }) {
                if case .transfer(let intent) = job.stage, intent == nil || intent == .cancelRequested {
                    held[id]?.stage = .transfer(intent: .release)
                    actions.append(.cancelTransfer(id))
                }
            }
        }
        return actions + claimIfFree(now: now, polling: true) + settle()
    }

    /// The store may have work.
    mutating func wakeup(now: Instant) -> [Action] {
        nextClaim = now
        return claimIfFree(now: now, polling: false)
    }

    mutating func claimed(_ jobs: [ClaimedJob], limit: Int, now: Instant) -> [Action] {
        claiming = false
        var actions: [Action] = []
        for job in jobs {
            let id = job.lease.job
            if let recorded = job.recorded {
                held[id] = Held(lease: job.lease, stage: .handling, claimedAt: now)
                actions.append(.runHandler(id, recorded))
            } else {
                held[id] = Held(lease: job.lease, stage: .transfer(intent: nil), claimedAt: now)
                actions.append(.startTransfer(job))
            }
        }
        // A full batch: there may be more at once. Fewer: wait for a wakeup or the poll.
        nextClaim = jobs.count >= limit ? now : now + settings.pollInterval
        if phase != .running {
            // Claimed while stopping: give them back untouched.
            for job in jobs {
                held[job.lease.job] = nil
                releasing.append(job.lease)
            }
            return releaseSuspects() + settle()
        }
        return actions + releaseSuspects() + claimIfFree(now: now, polling: false)
    }

    mutating func claimFailed(now: Instant) -> [Action] {
        claiming = false
        nextClaim = now + settings.pollInterval
        return releaseSuspects() + settle()
    }

    /// A transfer ended with `outcome` (what its result means, decided by the worker).
    mutating func transferEnded(_ id: JobID, outcome: JobOutcome, now: Instant) -> [Action] {
        guard let job = held[id], case .transfer(let intent) = job.stage else { return [] }
        switch intent {
        case .abandon?:
            held[id] = nil
            return claimIfFree(now: now, polling: false) + settle()
        case .release?:
            if case .cancelled = outcome {
                held[id] = nil
                releasing.append(job.lease)
                return settle()
            }
            // It finished before the cancel took: record it.
            held[id]?.stage = .finishing(outcome, inFlight: true)
            return [.finish(job.lease, outcome)]
        case .cancelRequested?:
            let recorded: JobOutcome = if case .cancelled = outcome { .cancelled(reason: "cancelled") } else { outcome }
            held[id]?.stage = .finishing(recorded, inFlight: true)
            return [.finish(job.lease, recorded)]
        case nil:
            held[id]?.stage = .finishing(outcome, inFlight: true)
            return [.finish(job.lease, outcome)]
        }
    }

    /// `finish` returned: `recorded` false means the lease was lost.
    mutating func finished(_ id: JobID, recorded: Bool, now: Instant) -> [Action] {
        guard let job = held[id], case .finishing(let outcome, _) = job.stage else { return [] }
        if case .retry = outcome { held[id] = nil }
        else if recorded {
            held[id]?.stage = .handling
            return [.runHandler(id, outcome)]
        } else {
            held[id] = nil
        }
        return claimIfFree(now: now, polling: false) + settle()
    }

    /// `finish` threw (the store is unreachable): sent again at the next tick.
    mutating func finishFailed(_ id: JobID) -> [Action] {
        guard let job = held[id], case .finishing(let outcome, _) = job.stage else { return [] }
        held[id]?.stage = .finishing(outcome, inFlight: false)
        return []
    }

    mutating func handlerReturned(_ id: JobID) -> [Action] {
        guard let job = held[id], job.stage == .handling else { return [] }
        held[id]?.stage = .marking
        return [.markHandled(job.lease)]
    }

    mutating func marked(_ id: JobID, now: Instant) -> [Action] {
        guard held[id]?.stage == .marking else { return [] }
        held[id] = nil
        return claimIfFree(now: now, polling: false) + settle()
    }

    /// The store answered the heartbeat sent at `sentAt`.
    mutating func heartbeatReplied(_ reply: HeartbeatReply, sentAt: Instant, now: Instant) -> [Action] {
        heartbeatSentAt = nil
        switch reply {
        case .declaredDead:
            lastGoodHeartbeat = sentAt
            let actions = abandonAll()
            abandoned.removeAll()  // the store takes back everything a dead worker held
            return actions + [.reregister] + settle()
        case .alive(let stillHeld, let cancelRequested):
            lastGoodHeartbeat = sentAt
            var actions: [Action] = []
            var giveBack: [Lease] = []
            for (id, lease) in abandoned.sorted(by: { $0.key < $1.key }) {
                if !stillHeld.contains(id) {
                    abandoned[id] = nil  // rescued or claimed by another: not ours any more
                } else if held[id] == nil {
                    abandoned[id] = nil  // its transfer has ended: nothing of ours writes for it
                    giveBack.append(lease)
                }
            }
            if !giveBack.isEmpty { actions.append(.giveBack(giveBack)) }
            for (id, job) in held.sorted(by: { $0.key < $1.key }) where job.claimedAt < sentAt {
                if !stillHeld.contains(id) {
                    actions += abandon(id)
                } else if cancelRequested.contains(id), case .transfer(nil) = job.stage {
                    held[id]?.stage = .transfer(intent: .cancelRequested)
                    actions.append(.cancelTransfer(id))
                }
            }
            // Jobs the store gives this worker that it does not run: a claim that committed but
            // whose reply was lost. While a claim is in flight its reply may still bring them:
            // they are decided when it is in. The release is fenced by the owner, so a job that
            // left this worker since the heartbeat (handled, given back) is not touched.
            // Jobs given back above, or abandoned and still ending, are not among them.
            suspects.formUnion(stillHeld.subtracting(held.keys).subtracting(giveBack.map(\.job)).subtracting(abandoned.keys))
            if !claiming { actions += releaseSuspects() }
            return actions + settle()
        }
    }

    mutating func heartbeatFailed(now: Instant) -> [Action] {
        heartbeatSentAt = nil
        return tick(now: now)
    }

    /// Stop claiming; let transfers run until `now + drain`, then give the rest back.
    mutating func stop(now: Instant, drain: Duration) -> [Action] {
        switch phase {
        case .running: phase = .draining(deadline: now + drain)
        // A later stop with a shorter drain brings the deadline forward (a cancellation
        // after a graceful stop), never back.
        case .draining(let deadline) where now + drain < deadline: phase = .draining(deadline: now + drain)
        default: return []
        }
        giveUpAt = now + max(drain, .zero) + settings.storeGrace
        return drain <= .zero ? tick(now: now) : settle()
    }

    /// The leases given back.
    mutating func released() -> [Action] {
        guard phase == .releasing else { return [] }
        phase = .stopped
        releaseSent.removeAll()
        return [.stopped]
    }

    // MARK: Helpers

    /// Gives back the suspects that no claim brought (and that are not being given back already).
    private mutating func releaseSuspects() -> [Action] {
        let unknown = suspects.subtracting(held.keys).subtracting(releasing.map(\.job)).subtracting(abandoned.keys)
        suspects.removeAll()
        return unknown.isEmpty ? [] : [.releaseUnknown(unknown.sorted())]
    }

    private mutating func claimIfFree(now: Instant, polling: Bool) -> [Action] {
        guard phase == .running, !claiming, now >= nextClaim else { return [] }
        let free = settings.capacity - held.count
        guard free > 0 else { return [] }
        claiming = true
        return [.claim(limit: free)]
    }

    private mutating func abandon(_ id: JobID) -> [Action] {
        guard let job = held[id] else { return [] }
        abandoned[id] = job.lease
        if case .transfer(let intent) = job.stage {
            if intent == .abandon { return [] }
            held[id]?.stage = .transfer(intent: .abandon)
            return [.cancelTransfer(id)]
        }
        // Finishing, handling or marking: its writes are fenced and will be refused.
        held[id] = nil
        return []
    }

    private mutating func abandonAll() -> [Action] {
        releasing.removeAll()
        return held.keys.sorted().flatMap { abandon($0) }
    }

    /// While stopping: once no transfer runs and nothing is being recorded, give back what is
    /// left (handler-stage jobs included: another worker runs their handler) and stop.
    private mutating func settle() -> [Action] {
        guard case .draining = phase, !claiming else { return [] }
        // Handlers run until the deadline; after it their jobs are given back with the rest.
        let deadlinePassed = deadlinePassed
        let busy = held.values.contains { job in
            switch job.stage {
            case .transfer, .finishing, .marking: true
            case .handling: !deadlinePassed
            }
        }
        if busy { return [] }
        let handlerLeases = held.values.filter { $0.stage == .handling }.map(\.lease)
        let leases = (releasing + handlerLeases).sorted { $0.job < $1.job }
        held.removeAll()
        releasing.removeAll()
        releaseSent = leases
        phase = .releasing
        return [.release(leases)]
    }

    /// Past the drain deadline and the store grace: stop without the writes still owed. The
    /// jobs stay leased in the store (a finish not recorded, a release not made) and are
    /// rescued from there after its TTL, then run again: nothing is lost, a finished one runs
    /// twice. Every reply that comes later finds nothing held and is ignored.
    private mutating func giveUp() -> [Action] {
        let jobs = Set(held.keys).union(releasing.map(\.job)).union(releaseSent.map(\.job))
        // A transfer not yet told to stop (a drain of zero with no grace) is stopped now.
        let cancels: [Action] = held.sorted(by: { $0.key < $1.key }).compactMap { id, job in
            if case .transfer(let intent) = job.stage, intent != .release, intent != .abandon { .cancelTransfer(id) } else { nil }
        }
        held.removeAll()
        releasing.removeAll()
        releaseSent.removeAll()
        phase = .stopped
        return cancels + (jobs.isEmpty ? [.stopped] : [.gaveUp(jobs.sorted()), .stopped])
    }
}
