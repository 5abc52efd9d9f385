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
/// (``hasBegun``), so every byte offered belongs to one attempt. The decisions are
/// ``StateMachine``'s, under one lock; continuations are resumed and blocks dispatched after it
/// is released.
final class BodyStream: Sendable {
    /// Where the chunks go.
    enum Mode: Sendable {
        /// Dispatched to `queue`, one block per chunk, in order.
        case push(queue: DispatchQueue, head: (@Sendable (ResponseHead) -> Void)?, body: @Sendable (Data) -> Void)
        /// Kept here until a ``ResponseBody`` iterator takes them.
        case pull
    }

    /// The default limit of bytes handed over and not yet consumed: 1 MiB.
    static let defaultLimit = 1 << 20
    /// The default low water, at which a paused stream resumes: 256 KiB.
    static let defaultLowWater = 256 << 10

    let mode: Mode
    typealias Machine = StateMachine<
        CheckedContinuation<Result<ResponseHead, RequestError>, Never>,
        CheckedContinuation<Result<Data?, RequestError>, Never>,
        CheckedContinuation<Void, Never>,
        @Sendable () -> Void
    >
    /// Internal, not private, for the tests' observations (`BodyStream+Observation` in Tests).
    let state: Locked<Machine>

    init(mode: Mode, limit: Int = BodyStream.defaultLimit, lowWater: Int = BodyStream.defaultLowWater) {
        self.mode = mode
        let keepsChunks = if case .pull = mode { true } else { false }
        self.state = Locked(Machine(keepsChunks: keepsChunks, limit: limit, lowWater: lowWater))
    }

    // MARK: Producer (the engine thread, and the operation's deliver)

    /// True once the head was handed over: from then on the operation is not retried.
    var hasBegun: Bool { state.withLock { $0.head != nil } }

    /// Hands the head of the response whose body is streamed to the consumer. Once.
    func begin(_ head: ResponseHead) {
        guard case .handOver(let head, let waiter) = state.withLock({ $0.begin(head) }) else { return }
        waiter?.resume(returning: .success(head))
        if case .push(let queue, let handler?, _) = mode { queue.async { handler(head) } }
    }

    /// Takes a chunk, or refuses it (returns false) to pause the transfer: then `resume` runs
    /// once the consumer has caught up, and the same bytes are offered again.
    func offer(_ bytes: UnsafeRawBufferPointer, resume: @escaping @Sendable () -> Void) -> Bool {
        let count = bytes.count
        switch state.withLock({ $0.offer(count: count, resume: resume) { Data(bytes) } }) {
        case .dropped, .kept:
            return true
        case .pause(let waking):
            for waiter in waking { waiter.resume() }
            return false
        case .hand(let chunk, let waiter):
            waiter.resume(returning: .success(chunk))
            return true
        case .dispatch(let chunk):
            if case .push(let queue, _, let handler) = mode {
                queue.async { [self] in
                    handler(chunk)
                    consumed(count)
                }
            }
            return true
        }
    }

    /// Ends the stream, once, with the operation's result: on success the head (when none was
    /// handed over yet: a bodiless response, or one kept in memory for the retry decision)
    /// and the body that was not streamed; on failure the error, after the chunks already
    /// handed over (dropped for ``RequestError/cancelled``).
    func finish(_ result: Result<Response, RequestError>) {
        let outcome = result.map { (head: ResponseHead(status: $0.status, headerFields: $0.headerFields), body: $0.body) }
        guard let finish = state.withLock({ $0.finish(outcome) }) else { return }
        if case let (waiter, head)? = finish.headWaiter { waiter.resume(returning: head) }
        if case let (waiter, value)? = finish.chunkWaiter { waiter.resume(returning: value) }
        for waiter in finish.pauseWaiters { waiter.resume() }
        if case .push(let queue, let headHandler, let bodyHandler) = mode {
            if let head = finish.beginsNow, let headHandler { queue.async { headHandler(head) } }
            if let trailing = finish.trailing { queue.async { bodyHandler(trailing) } }
        }
    }

    // MARK: Consumer

    /// Push mode: a handler returned from a chunk of `count` bytes.
    func consumed(_ count: Int) {
        state.withLock { $0.consumed(count) }?()
    }

    /// Waits for the head; fails when the operation ended before one was handed over.
    func head() async -> Result<ResponseHead, RequestError> {
        await withCheckedContinuation { continuation in
            if let ready = state.withLock({ $0.head(orWait: continuation) }) { continuation.resume(returning: ready) }
        }
    }

    /// Pull mode: the next chunk, nil at the end, or the error the stream ended with (once;
    /// nil after it).
    func next() async -> Result<Data?, RequestError> {
        await withCheckedContinuation { continuation in
            let (ready, resume) = state.withLock { $0.next(orWait: continuation) }
            resume?()
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
