import CCurl
import Dispatch
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The transfer engine: one thread that drives one libcurl multi handle.
///
/// Other threads hand it transfers through a lock-protected inbox and wake it with
/// `curl_multi_wakeup`; with nothing to do it sleeps in `curl_multi_poll`. Everything libcurl
/// does — callbacks included — happens on the engine thread, which runs no user code:
/// delegates get the results there and pass user handlers on to their callback queues.
///
/// By default every transfer in the process goes through ``shared``, so connections, DNS
/// results and TLS sessions are reused across operations and queues.
final class CurlEngine: @unchecked Sendable {  // safe: `inbox` is locked; all other mutable state belongs to the engine thread
    static let shared = CurlEngine(name: "CurlQueueEngine")

    /// Handlers to hand to a queue after the turn (``afterThisTurn(on:batched:_:)``).
    ///
    /// A struct, not a tuple: a list of tuples is emptied every turn through the runtime's
    /// generic tuple code, which destroys each element field by field through its type's
    /// metadata (docs/performance.md).
    private struct DeferredCallback {
        let queue: DispatchQueue
        let batched: Bool
        let work: @Sendable () -> Void
    }

    private enum Command {
        case add(Attempt)
        case cancel(Attempt)
        case resume(Attempt)
    }

    private struct Inbox {
        var commands: [Command] = []
        var threadStarted = false
    }

    /// The engine thread's name, for Foundation and as `top -H`, `perf` and debuggers show it
    /// (at most 15 bytes, Linux's limit).
    private let name: String
    private let multi: UnsafeMutableRawPointer
    private let inbox = Locked(Inbox())
    private let engineThreadID = Atomic<UInt>(0)

    // Engine thread only, and without dynamic exclusivity checks, as for Attempt's state.
    @exclusivity(unchecked) private var idleHandles: [EasyHandle] = []
    @exclusivity(unchecked) private var activeCount = 0
    /// CURLMOPT_MAXCONNECTS as last set (see ``keepRoomForIdleConnections()``).
    private var connectionCacheLimit = 2 * CurlEngine.idleConnectionRoom
    /// The sockets of kept HTTP/1 connections, for the check before a request reuses one
    /// (see ``HTTP1Sockets``).
    @exclusivity(unchecked) var http1Sockets = HTTP1Sockets()
    @exclusivity(unchecked) private var localCommands: [Command] = []
    /// Handlers to hand to their queues once this turn's transfers are on the wire (see
    /// ``afterThisTurn(on:batched:_:)``).
    @exclusivity(unchecked) private var deferredCallbacks: [DeferredCallback] = []
    /// Awaiting tasks to resume once this turn's transfers are on the wire (see
    /// ``resumeAfterThisTurn(_:)``).
    @exclusivity(unchecked) private var deferredResumes: [@Sendable () -> Void] = []
    /// Empty lists that a turn swaps with the inbox's and with `localCommands`, to take their
    /// items without allocating: copying a list out and clearing it with
    /// `removeAll(keepingCapacity:)` while the copy lived made a new buffer every turn.
    @exclusivity(unchecked) private var spareInbox: [Command] = []
    @exclusivity(unchecked) private var spareCommands: [Command] = []
    /// A spare list that grew past this many items is dropped rather than kept, and a list
    /// made anew after a turn is never given more room than this (a burst of 100,000 adds
    /// should not hold its buffer for the engine's life).
    private static let maxSpareCapacity = 1024
    /// The monotonic time of this turn, read once before each `curl_multi_perform`: the time
    /// callbacks give to the bytes they see move (``Attempt/lastActivityNanos``), at the cost
    /// of no clock read per callback.
    @exclusivity(unchecked) private(set) var turnNanos: UInt64 = 0
    /// The transfers with a stall limit (idle, head), each knowing its place
    /// (``Attempt/deadlineIndex``), and no later than the earliest of their deadlines: the
    /// engine looks at them when that time comes, and sleeps no longer than until then.
    /// Deadlines only move later as bytes move (a new one lowers this), so the list is walked
    /// about once per limit, not on every turn.
    @exclusivity(unchecked) private var timedAttempts: [Attempt] = []
    /// Attempts paused for a receive-speed limit, each until its `pacedUntil` (see
    /// `Attempt+Pacing.swift`).
    @exclusivity(unchecked) var pacedAttempts: [Attempt] = []
    @exclusivity(unchecked) private var nextDeadline = UInt64.max
    /// Transfers whose throttled progress holds a report back (``Attempt/heldProgress``), and
    /// the earliest time one of them is due.
    @exclusivity(unchecked) private var progressFlushes: [Attempt] = []
    @exclusivity(unchecked) private var nextProgressFlush = UInt64.max
    private let maxIdleHandles = 256

    private static let globalInit: Void = {
        curl_global_init(Int(CURL_GLOBAL_ALL))
        prepareAllocator()
    }()

    /// Keeps glibc from giving the receive buffers' memory back to the system after every
    /// transfer, to fault it in again for the next one.
    ///
    /// libcurl 7.88 allocates a transfer's receive buffer (120 KiB for a body kept in memory)
    /// when the transfer starts and frees it when it ends. The buffers of the transfers
    /// running lie side by side; when several end in one turn, their freed blocks join the
    /// free memory at the top of the engine thread's heap, and glibc returns the top to the
    /// system (`madvise`) once more than its trim threshold, 128 KiB at first, is free there.
    /// The next transfers then fault every page they read into back in, which costs CPU time
    /// at every concurrency above a few (docs/performance.md has the figures).
    ///
    /// Freeing one block of the size of the largest receive buffer (a body written to a
    /// file's) puts glibc in the state the first download to a file would: blocks up to that
    /// size come from the heap, and up to twice that may stay free at its top, which holds the
    /// buffers of 8 transfers. glibc's own settings win: when the process set a threshold
    /// (`mallopt`, `GLIBC_TUNABLES`), glibc no longer moves them, and this changes nothing. Other
    /// C libraries just allocate and free one block.
    static func prepareAllocator() {
        ccurl_free_block_of_size(Attempt.fileReceiveBufferSize + 1)
    }

    init(name: String) {
        Self.globalInit
        self.name = name
        guard let multi = curl_multi_init() else { fatalError("curl_multi_init failed: out of memory") }
        self.multi = multi
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        // libcurl sizes its cache of idle connections at 4 × the transfers running, so a
        // process that talks to many hosts in turn would close the connections it is about to
        // reuse. Keep room for at least 256 idle connections beside the busy ones (see
        // ``keepRoomForIdleConnections()``); servers close the ones they no longer want.
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, connectionCacheLimit)
    }

    /// True on the engine thread.
    var isOnEngineThread: Bool {
        engineThreadID.load(ordering: .relaxed) == UInt(pthread_self())
    }

    /// Hands a transfer to the engine. From any thread; on the engine thread itself (a
    /// delegate starting the next transfer) it is taken up without a wakeup.
    func submit(_ attempt: Attempt) {
        send(.add(attempt))
    }

    /// Cancels a submitted transfer. Its delegate hears `.cancelled` once the engine has
    /// removed it from the multi handle, unless it finished first.
    func cancel(_ attempt: Attempt) {
        attempt.cancelRequested.store(true, ordering: .relaxed)
        send(.cancel(attempt))
    }

    /// Unpauses a transfer whose write callback paused it (its stream's consumer caught up).
    /// From any thread; does nothing once the transfer left the multi handle.
    func resume(_ attempt: Attempt) {
        send(.resume(attempt))
    }

    private func send(_ command: Command) {
        if isOnEngineThread {
            localCommands.append(command)
            return
        }
        let (wake, start) = inbox.withLock { inbox -> (Bool, Bool) in
            let wasEmpty = inbox.commands.isEmpty
            inbox.commands.append(command)
            let start = !inbox.threadStarted
            inbox.threadStarted = true
            return (wasEmpty, start)
        }
        if start {
            let thread = Thread { [self] in run() }
            thread.name = name
            thread.start()
        } else if wake {
            curl_multi_wakeup(multi)
        }
    }

    // MARK: - The engine thread

    private func run() {
        engineThreadID.store(UInt(pthread_self()), ordering: .relaxed)
        // Foundation's `Thread.name` names the thread for Foundation only, on Linux.
        ccurl_name_current_thread(name)
        var running: Int32 = 0
        while true {
            turnNanos = Self.monotonicNanos()
            // Scoped: the commands (and the transfers they hold) are let go of before the
            // engine sleeps, not kept until the next turn.
            do {
                var commands = spareInbox
                spareInbox = []  // `commands` holds the only reference, so the inbox gets it unshared
                inbox.withLock { swap(&$0.commands, &commands) }
                for command in commands { handle(command) }
                commands.removeAll(keepingCapacity: commands.capacity <= Self.maxSpareCapacity)
                spareInbox = commands
            }
            // Transfers that finish in a perform often start others (a queue's next
            // operations): a second perform puts those on the wire before anyone is woken.
            var rounds = 0
            repeat {
                swap(&localCommands, &spareCommands)
                for command in spareCommands { handle(command) }  // may add to localCommands
                spareCommands.removeAll(keepingCapacity: spareCommands.capacity <= Self.maxSpareCapacity)
                turnNanos = Self.monotonicNanos()
                curl_multi_perform(multi, &running)
                if !timedAttempts.isEmpty { restampAfterASlowPerform() }
                drainMessages()
                rounds += 1
            } while !localCommands.isEmpty && rounds < 2
            if turnNanos >= nextDeadline { endStalledTransfers(now: turnNanos) }
            if nextProgressFlush != .max, Self.monotonicNanos() >= nextProgressFlush {
                flushHeldProgress(now: Self.monotonicNanos())
            }
            if !pacedAttempts.isEmpty { unpauseDueTransfers() }
            runDeferred()
            // More work of our own: go round again without sleeping, but through the inbox
            // first, so that a long chain of completions never holds up other threads' work.
            if !localCommands.isEmpty { continue }
            // curl lowers the timeout to its own next deadline; the wakeup ends it at once.
            var timeout: Int32 = activeCount == 0 ? 60_000 : 1000
            let wakeAt = Swift.min(nextDeadline, nextProgressFlush)
            if wakeAt != .max {
                let now = Self.monotonicNanos()
                let wait = wakeAt > now ? (wakeAt - now + 999_999) / 1_000_000 : 0
                timeout = Int32(clamping: Swift.min(UInt64(timeout), wait))
            }
            if !pacedAttempts.isEmpty { timeout = Swift.min(timeout, millisecondsToNextUnpause()) }
            curl_multi_poll(multi, nil, 0, timeout, nil)
        }
    }

    /// A perform that took longer than this has its stamps moved to its end.
    private static let slowPerformNanos: UInt64 = 10_000_000

    /// The callbacks date what they see to the start of the perform that runs them
    /// (``turnNanos``, no clock read per callback). A perform held up (a `write(2)` waiting for
    /// a loaded disk, the engine thread descheduled on a busy machine) would so date a byte
    /// that came at its end to its start, and the stall limits would end that transfer early
    /// by the perform's length: a transfer dated in a perform longer than ``slowPerformNanos``
    /// gets the perform's end instead (later, never earlier, than when the engine saw it).
    private func restampAfterASlowPerform() {
        let end = Self.monotonicNanos()
        guard end &- turnNanos > Self.slowPerformNanos else { return }
        for attempt in timedAttempts {
            if attempt.lastActivityNanos == turnNanos { attempt.lastActivityNanos = end }
            if attempt.headClockStart == turnNanos { attempt.headClockStart = end }
        }
    }

    static func monotonicNanos() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    /// A transfer's stall deadline may have come earlier than ``nextDeadline`` (its request
    /// went out, its body was sent). Engine thread.
    func lowerNextDeadline(to deadline: UInt64) {
        if deadline < nextDeadline { nextDeadline = deadline }
    }

    /// Has the engine report `attempt`'s held-back progress at `time` (engine thread; called
    /// by its progress callback when the throttle holds a report back).
    func flushProgress(of attempt: Attempt, at time: UInt64) {
        attempt.isInProgressFlushList = true
        progressFlushes.append(attempt)
        if time < nextProgressFlush { nextProgressFlush = time }
    }

    /// Reports the held-back progress that is due, of transfers still running; keeps the rest
    /// for later. A transfer that reported since has nothing held, and one that ended reports
    /// its final sizes with its completion instead.
    private func flushHeldProgress(now: UInt64) {
        var next = UInt64.max
        var index = 0
        while index < progressFlushes.count {
            let attempt = progressFlushes[index]
            let due = attempt.lastProgressNanos &+ Attempt.progressInterval
            if attempt.handle != nil, attempt.heldProgress != nil, due > now {
                next = Swift.min(next, due)
                index += 1
                continue
            }
            if attempt.handle != nil, let held = attempt.heldProgress {
                attempt.heldProgress = nil
                attempt.lastProgressNanos = now
                attempt.reportProgress(download: held.download, upload: held.upload)
            }
            attempt.isInProgressFlushList = false
            progressFlushes.swapAt(index, progressFlushes.count - 1)
            progressFlushes.removeLast()
        }
        nextProgressFlush = next
    }

    /// Ends the transfers whose stall deadline passed with `.timedOut` (code 28), as a cancel
    /// would end them (a `.part` file is kept for a resume), and finds the next deadline.
    ///
    /// libcurl's own low-speed check cannot do this: it averages the speed over its last
    /// few seconds, so a transfer that stalled after moving bytes failed 6 to 7 s after the
    /// last byte with a limit of 1 s. Nor can a progress callback: libcurl need not call it
    /// while nothing happens. The engine's timer does not depend on either.
    private func endStalledTransfers(now: UInt64) {
        var next = UInt64.max
        var index = 0
        while index < timedAttempts.count {
            let attempt = timedAttempts[index]
            let deadline = attempt.deadline
            guard deadline <= now, let easy = attempt.easy else {
                next = Swift.min(next, deadline)
                index += 1
                continue
            }
            let failure = attempt.stallFailure(now: now)
            curl_multi_remove_handle(multi, easy)
            attempt.abandon()
            release(attempt, keepingOptions: false)  // takes it out of the list: the next one is at `index`
            attempt.finish(.failure(failure))
        }
        nextDeadline = next
    }

    /// Runs `work` on `queue` after this turn: once the transfers started in the turn (a
    /// queue's next operations) went out with `curl_multi_perform`, before the engine sleeps.
    /// Waking another thread costs a syscall and, on a busy core, the engine's place on it,
    /// which should not delay the next request.
    ///
    /// With `batched` (for a serial queue), the batched work of one turn for one queue goes to
    /// it as one block, in the order given: one wakeup of the queue for all the operations that
    /// finished in the turn. Work that is not batched gets a block of its own, so that a
    /// concurrent queue may run it alongside. Engine thread only.
    func afterThisTurn(on queue: DispatchQueue, batched: Bool, _ work: @escaping @Sendable () -> Void) {
        deferredCallbacks.append(DeferredCallback(queue: queue, batched: batched, work: work))
    }

    /// Runs `resume`, which resumes the continuations of tasks awaiting an operation that
    /// finished in this turn, after the turn, as ``afterThisTurn(on:batched:_:)`` does: on the
    /// engine thread when it is the turn's only one, else together with the turn's others in
    /// one block on Dispatch's global queue. Engine thread only.
    ///
    /// Resuming a continuation wakes a thread of Swift's concurrency pool, which on a busy
    /// core takes the core from the thread that resumed it, runs the one task and sleeps
    /// again. Resumed one after another on the engine thread, the tasks of a turn cost about
    /// one and a half context switches each (15,000 to 17,000 per 10,000 awaited GETs at
    /// concurrency 8 and 64, on one core). Resumed from one block, they are all queued before
    /// a pool thread runs, and it runs them in a row: 1,500 to 6,000 switches from a serial
    /// queue of the engine's, 550 to 3,600 from the global queue, whose threads on Linux are
    /// the ones that run Swift's tasks. The blocks of two turns may run at once there; nothing
    /// orders the resumes of different operations anyway. One task alone is resumed where it
    /// is: the hop would add a wakeup.
    func resumeAfterThisTurn(_ resume: @escaping @Sendable () -> Void) {
        deferredResumes.append(resume)
    }

    /// Hands this turn's results over: neither step adds work to the engine.
    private func runDeferred() {
        dispatchDeferredCallbacks()
        runDeferredResumes()
    }

    private func runDeferredResumes() {
        guard !deferredResumes.isEmpty else { return }
        if deferredResumes.count == 1 {
            deferredResumes.removeLast()()
            return
        }
        let resumes = deferredResumes
        // The block keeps this buffer; the next list is made at its size, as for callbacks.
        deferredResumes = []
        deferredResumes.reserveCapacity(min(resumes.count, Self.maxSpareCapacity))
        DispatchQueue.global().async { for resume in resumes { resume() } }
    }

    /// Hands the turn's handlers to their queues. Each block takes its handlers out of a
    /// ``Handoff``, and the engine keeps no other reference to them: they are let go of on
    /// the queue that ran them, never here.
    private func dispatchDeferredCallbacks() {
        guard !deferredCallbacks.isEmpty else { return }
        let count = deferredCallbacks.count
        let queue = deferredCallbacks[0].queue
        if count == 1 {
            // One block, batched or not: no list, no wrapper; the list keeps its buffer.
            let work = Handoff(deferredCallbacks.removeLast().work)
            queue.async { work.take()?() }
            return
        }
        // The usual turn: every handler batched for one queue (the default one). The block
        // takes the list as it is, with no copy of it filtered per queue; the next turn's list
        // gets one of the same size at once rather than growing into it.
        if deferredCallbacks.allSatisfy({ $0.batched && $0.queue === queue }) {
            let callbacks = Handoff(deferredCallbacks)
            deferredCallbacks = []
            deferredCallbacks.reserveCapacity(min(count, Self.maxSpareCapacity))
            queue.async { for callback in callbacks.take() ?? [] { callback.work() } }
            return
        }
        // Several queues: a block per queue for the batched handlers, in their order, and a
        // block per handler for the others.
        var blocks: [(queue: DispatchQueue, work: Handoff<[@Sendable () -> Void]>)] = []
        var batchedQueues: [DispatchQueue] = []
        for callback in deferredCallbacks {
            guard callback.batched else {
                blocks.append((callback.queue, Handoff([callback.work])))
                continue
            }
            if !batchedQueues.contains(where: { $0 === callback.queue }) { batchedQueues.append(callback.queue) }
        }
        for batchedQueue in batchedQueues {
            let work = deferredCallbacks.filter { $0.batched && $0.queue === batchedQueue }.map(\.work)
            blocks.append((batchedQueue, Handoff(work)))
        }
        deferredCallbacks.removeAll(keepingCapacity: count <= Self.maxSpareCapacity)
        for block in blocks {
            let work = block.work
            block.queue.async { for item in work.take() ?? [] { item() } }
        }
    }

    private func handle(_ command: Command) {
        switch command {
        case .add(let attempt):
            if attempt.cancelRequested.load(ordering: .relaxed) {
                attempt.finish(.failure(.cancelled))
                return
            }
            start(attempt)
        case .cancel(let attempt):
            guard let easy = attempt.easy else { return }  // finished, or will see the flag
            curl_multi_remove_handle(multi, easy)
            attempt.abandon()
            release(attempt, keepingOptions: false)
            attempt.finish(.failure(.cancelled))
        case .resume(let attempt):
            guard let easy = attempt.easy else { return }  // finished or cancelled meanwhile
            // The stall limits run again from now: the wait was the consumer's.
            attempt.isPaused = false
            attempt.lastActivityNanos = Self.monotonicNanos()
            if attempt.hasStallLimits { lowerNextDeadline(to: attempt.deadline) }
            // May call the write callback at once with the bytes it refused.
            _ = ccurl_easy_unpause(easy)
        }
    }

    private func start(_ attempt: Attempt) {
        let handle = idleHandles.popLast() ?? EasyHandle()
        do {
            try attempt.configure(handle)
        } catch {
            attempt.easy = nil
            attempt.releaseCurlResources()
            recycle(handle, keepingOptions: false)
            attempt.finish(.failure(error))
            return
        }
        attempt.handle = handle
        activeCount += 1
        if activeCount + Self.idleConnectionRoom > connectionCacheLimit { keepRoomForIdleConnections() }
        if attempt.hasStallLimits {
            attempt.deadlineIndex = timedAttempts.count
            timedAttempts.append(attempt)
        }
        // The multi handle's reference: balanced in `release`.
        _ = Unmanaged.passRetained(attempt)
        let status = curl_multi_add_handle(multi, handle.easy)
        if status != CURLM_OK {
            let message = String(cString: curl_multi_strerror(status))
            release(attempt, keepingOptions: false)
            attempt.finish(.failure(.transport(TransportFailure(code: .failedInit, message: message))))
            return
        }
    }

    private func drainMessages() {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let code = ccurl_msg_result(message)
            var pointer: UnsafeMutableRawPointer?
            _ = ccurl_easy_getinfo_pointer(easy, CURLINFO_PRIVATE, &pointer)
            guard let pointer else { continue }
            let attempt = Unmanaged<Attempt>.fromOpaque(pointer).takeUnretainedValue()
            // While the handle is in the multi handle: libcurl gives its socket only then.
            if code == CURLE_OK { attempt.noteHTTP1Socket(easy) }
            curl_multi_remove_handle(multi, easy)
            let completion = attempt.complete(code: code, errorBuffer: attempt.handle!.errorBuffer)
            release(attempt, keepingOptions: code == CURLE_OK)
            switch completion {
            case .finished(let outcome):
                attempt.finish(outcome)
            case .restart:
                attempt.prepareRestart()
                start(attempt)
            }
        }
    }

    /// Detaches the transfer from its easy handle, returns the handle to the pool, and drops
    /// the multi handle's reference to the transfer. The handle keeps its options only after
    /// a transfer that libcurl completed without error (`keepingOptions`); a cancelled or
    /// failed one is reset.
    private func release(_ attempt: Attempt, keepingOptions: Bool) {
        guard let handle = attempt.handle else { return }
        attempt.handle = nil
        let place = attempt.deadlineIndex
        if place >= 0 {
            let last = timedAttempts.removeLast()
            if last !== attempt {
                timedAttempts[place] = last
                last.deadlineIndex = place
            }
            attempt.deadlineIndex = -1
        }
        if attempt.pacedUntil != 0 { stopPacing(attempt) }
        attempt.releaseCurlResources()
        recycle(handle, keepingOptions: keepingOptions)
        activeCount -= 1
        if activeCount + 3 * Self.idleConnectionRoom < connectionCacheLimit {
            keepRoomForIdleConnections()
        }
        Unmanaged.passUnretained(attempt).release()
    }

    /// Idle connections the engine has room for, at least, beyond the busy ones.
    static let idleConnectionRoom = 256

    /// Keeps room for ``idleConnectionRoom`` idle connections beside the transfers running.
    /// libcurl's bound (CURLMOPT_MAXCONNECTS) counts busy connections too, and a connection
    /// handed back to a full cache is closed at once when every other one is busy: with 300
    /// transfers held elsewhere in the process, 40 requests two queues of 2 sent one after
    /// another used 36 connections instead of 4. The bound stays between 1 and 3 rooms above
    /// the transfers running, so it moves only every 256 transfers. Engine thread.
    private func keepRoomForIdleConnections() {
        let limit = activeCount + 2 * Self.idleConnectionRoom
        guard limit != connectionCacheLimit else { return }
        connectionCacheLimit = limit
        _ = ccurl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, limit)
    }

    private func recycle(_ handle: EasyHandle, keepingOptions: Bool) {
        if idleHandles.count < maxIdleHandles {
            handle.recycle(keepingOptions: keepingOptions)
            idleHandles.append(handle)
        }
    }
}
