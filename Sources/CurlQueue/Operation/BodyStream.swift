import DequeModule
import Dispatch
import Foundation

/// The response body of one streaming operation on its way from the engine to the consumer,
/// with the backpressure between them.
///
/// The producer is the transfer's write callback on the engine thread: ``offer(_:resume:)``
/// takes a chunk, or refuses it when the bytes handed over and not yet consumed would pass
/// ``limit`` — the callback then returns `CURL_WRITEFUNC_PAUSE` and libcurl stops reading the
/// socket, keeping that chunk to offer again. The consumer — a handler on the callback queue
/// (`push`) or a task iterating ``ResponseBody`` (`pull`) — reports what it consumed; once a
/// paused stream is down to ``lowWater`` the `resume` closure of the refused offer runs (off the
/// engine thread: it only puts a command in the engine's inbox) and the engine unpauses.
///
/// Per operation, not per attempt: no retry happens once the head was handed over
/// (``hasBegun``), so every byte offered belongs to one attempt. All state is under one lock;
/// continuations are resumed and blocks dispatched after it is released.
final class BodyStream: Sendable {
    /// Where the chunks go.
    enum Mode: Sendable {
        /// Dispatched to `queue`, one block per chunk, in order.
        case push(queue: DispatchQueue, head: (@Sendable (ResponseHead) -> Void)?, body: @Sendable (Data) -> Void)
        /// Kept here until a ``ResponseBody`` iterator takes them.
        case pull
    }

    /// The default ``limit``: 1 MiB.
    static let defaultLimit = 1 << 20
    /// The default ``lowWater``: 256 KiB.
    static let defaultLowWater = 256 << 10

    let mode: Mode
    /// The most bytes handed over and not consumed that an offer may bring the stream to (one
    /// chunk is always taken when nothing is outstanding, however large).
    let limit: Int
    /// A paused stream resumes once the outstanding bytes are down to this.
    let lowWater: Int
    private let state: Locked<State>

    private struct State {
        var head: ResponseHead?
        /// Pull mode: chunks not yet taken by the iterator.
        var chunks = Deque<Data>()
        /// Bytes handed over and not yet consumed (pull: in `chunks`; push: dispatched, their
        /// handler not yet returned).
        var outstanding = 0
        var highWater = 0
        var pauseCount = 0
        /// How to unpause the transfer, while the stream is paused.
        var resume: (@Sendable () -> Void)?
        /// How the stream ended, once it did: nil error for a complete body.
        var ended: Ended?
        var errorDelivered = false
        var headWaiter: CheckedContinuation<Result<ResponseHead, RequestError>, Never>?
        var chunkWaiter: CheckedContinuation<Result<Data?, RequestError>, Never>?
        var pauseWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private struct Ended {
        var error: RequestError?
    }

    init(mode: Mode, limit: Int = BodyStream.defaultLimit, lowWater: Int = BodyStream.defaultLowWater) {
        self.mode = mode
        self.limit = max(1, limit)
        self.lowWater = min(max(0, lowWater), self.limit)
        self.state = Locked(State())
    }

    // MARK: Producer (the engine thread, and the operation's deliver)

    /// True once the head was handed over: from then on the operation is not retried.
    var hasBegun: Bool { state.withLock { $0.head != nil } }

    /// Hands the head of the response whose body is streamed to the consumer. Once.
    func begin(_ head: ResponseHead) {
        let waiter = state.withLock { state -> CheckedContinuation<Result<ResponseHead, RequestError>, Never>? in
            guard state.head == nil, state.ended == nil else { return nil }
            state.head = head
            defer { state.headWaiter = nil }
            return state.headWaiter
        }
        waiter?.resume(returning: .success(head))
        if case .push(let queue, let handler?, _) = mode { queue.async { handler(head) } }
    }

    /// Takes a chunk, or refuses it (returns false) to pause the transfer: then `resume` runs
    /// once the consumer has caught up, and the same bytes are offered again.
    func offer(_ bytes: UnsafeRawBufferPointer, resume: @escaping @Sendable () -> Void) -> Bool {
        let count = bytes.count
        let (accepted, waiter, pauseWaiters) = state.withLock {
            state -> (Data?, CheckedContinuation<Result<Data?, RequestError>, Never>?, [CheckedContinuation<Void, Never>]) in
            guard state.ended == nil else { return (nil, nil, []) }
            if state.outstanding > 0, state.outstanding + count > limit {
                state.resume = resume
                state.pauseCount += 1
                defer { state.pauseWaiters = [] }
                return (nil, nil, state.pauseWaiters)
            }
            let chunk = Data(bytes)
            if case .pull = mode, let waiter = state.chunkWaiter {
                state.chunkWaiter = nil
                return (chunk, waiter, [])
            }
            if case .pull = mode { state.chunks.append(chunk) }
            state.outstanding += count
            state.highWater = max(state.highWater, state.outstanding)
            return (chunk, nil, [])
        }
        for waiter in pauseWaiters { waiter.resume() }
        guard let chunk = accepted else { return state.withLock { $0.ended != nil } }
        if let waiter {
            waiter.resume(returning: .success(chunk))
        } else if case .push(let queue, _, let handler) = mode {
            queue.async { [self] in
                handler(chunk)
                consumed(count)
            }
        }
        return true
    }

    /// Ends the stream, once, with the operation's result: on success the head (when none was
    /// handed over yet: a bodiless response, or one kept in memory for the retry decision)
    /// and the body that was not streamed; on failure the error, after the chunks already
    /// handed over (dropped for ``RequestError/cancelled``).
    func finish(_ result: Result<Response, RequestError>) {
        var head: ResponseHead?
        var body = Data()
        if case .success(let response) = result {
            head = ResponseHead(status: response.status, headerFields: response.headerFields)
            body = response.body
        }
        let trailing = body
        let (headWaiter, chunkWaiter, pauseWaiters, beginsNow, delivery) = state.withLock { state in
            guard state.ended == nil else {
                return (CheckedContinuation<Result<ResponseHead, RequestError>, Never>?.none,
                        CheckedContinuation<Result<Data?, RequestError>, Never>?.none, [CheckedContinuation<Void, Never>](),
                        false, Result<Data?, RequestError>?.none)
            }
            var beginsNow = false
            var error: RequestError?
            switch result {
            case .success:
                if state.head == nil, let head {
                    state.head = head
                    beginsNow = true
                }
                if !trailing.isEmpty, case .pull = mode { state.chunks.append(trailing) }
            case .failure(let failure):
                error = failure
                if failure == .cancelled {
                    state.chunks.removeAll()
                    state.outstanding = 0
                }
            }
            state.ended = Ended(error: error)
            state.resume = nil
            let headWaiter = state.headWaiter
            state.headWaiter = nil
            let pauseWaiters = state.pauseWaiters
            state.pauseWaiters = []
            var delivery: Result<Data?, RequestError>?
            let chunkWaiter = state.chunkWaiter
            if chunkWaiter != nil {
                state.chunkWaiter = nil
                delivery = Self.take(&state, lowWater: lowWater).value
            }
            return (headWaiter, chunkWaiter, pauseWaiters, beginsNow, delivery)
        }
        if let headWaiter {
            if let head = state.withLock({ $0.head }) {
                headWaiter.resume(returning: .success(head))
            } else if case .failure(let error) = result {
                headWaiter.resume(returning: .failure(error))
            }
        }
        if let chunkWaiter, let delivery { chunkWaiter.resume(returning: delivery) }
        for waiter in pauseWaiters { waiter.resume() }
        if case .push(let queue, let headHandler, let bodyHandler) = mode {
            if beginsNow, let headHandler, let head { queue.async { headHandler(head) } }
            if !trailing.isEmpty { queue.async { bodyHandler(trailing) } }
        }
    }

    // MARK: Consumer

    /// Push mode: a handler returned from a chunk of `count` bytes.
    func consumed(_ count: Int) {
        let resume = state.withLock { state -> (@Sendable () -> Void)? in
            state.outstanding = max(0, state.outstanding - count)
            return Self.resumeIfDrained(&state, lowWater: lowWater)
        }
        resume?()
    }

    /// Waits for the head; fails when the operation ended before one was handed over.
    func head() async -> Result<ResponseHead, RequestError> {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Result<ResponseHead, RequestError>? in
                if let head = state.head { return .success(head) }
                if let ended = state.ended { return .failure(ended.error ?? .cancelled) }
                state.headWaiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Pull mode: the next chunk, nil at the end, or the error the stream ended with (once;
    /// nil after it).
    func next() async -> Result<Data?, RequestError> {
        await withCheckedContinuation { continuation in
            let (ready, resume) = state.withLock { state -> (Result<Data?, RequestError>?, (@Sendable () -> Void)?) in
                let (value, resume) = Self.take(&state, lowWater: lowWater)
                if value == nil { state.chunkWaiter = continuation }
                return (value, resume)
            }
            resume?()
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// The next thing the iterator gets, if there is one yet, and the resume to run.
    private static func take(_ state: inout State, lowWater: Int) -> (value: Result<Data?, RequestError>?, resume: (@Sendable () -> Void)?) {
        if let chunk = state.chunks.popFirst() {
            state.outstanding = max(0, state.outstanding - chunk.count)
            return (.success(chunk), resumeIfDrained(&state, lowWater: lowWater))
        }
        guard let ended = state.ended else { return (nil, nil) }
        if let error = ended.error, !state.errorDelivered {
            state.errorDelivered = true
            return (.failure(error), nil)
        }
        return (.success(nil), nil)
    }

    private static func resumeIfDrained(_ state: inout State, lowWater: Int) -> (@Sendable () -> Void)? {
        guard state.outstanding <= lowWater, let resume = state.resume else { return nil }
        state.resume = nil
        return resume
    }

    // MARK: For tests

    /// The most bytes that were ever handed over and not yet consumed.
    var highWaterBytes: Int { state.withLock { $0.highWater } }
    /// How many times an offer was refused (the transfer paused).
    var pauseCount: Int { state.withLock { $0.pauseCount } }
    /// Bytes handed over and not yet consumed.
    var outstandingBytes: Int { state.withLock { $0.outstanding } }

    /// Returns once the transfer is paused (an offer was refused and no resume has run since)
    /// or the stream ended: a test's consumer waits here to be as slow as it can.
    func waitUntilPausedOrEnded() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state -> Bool in
                if state.resume != nil || state.ended != nil { return true }
                state.pauseWaiters.append(continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }
}
