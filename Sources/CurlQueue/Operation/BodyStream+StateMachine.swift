import DequeModule
import Foundation

extension BodyStream {
    /// Everything that decides what a body stream does, as a value with no I/O and no lock in
    /// it: whether the head was handed over, the chunks and bytes not yet consumed, whether the
    /// transfer is paused and how to unpause it, how the stream ended, and who waits for what.
    ///
    /// `BodyStream` owns one, changes it under its lock, and performs the returned action after
    /// releasing it. Three parties race: the producer (the engine thread's write callback and
    /// the operation's end), the consumer (an iterator, or handlers on a queue) and a cancel
    /// (which reaches the stream as the operation's end). Whatever their order: the head is
    /// handed over at most once; a waiting consumer is resumed exactly once; a refused chunk's
    /// `resume` is handed out at most once, and never after the end; nothing is taken after the
    /// end; an iterator gets the error once, then the end.
    ///
    /// Generic over the waiting consumers (continuations) and the producer's `resume`, so that
    /// tests can drive it with plain values.
    struct StateMachine<HeadWaiter: Sendable, ChunkWaiter: Sendable, PauseWaiter: Sendable, Resume: Sendable>: Sendable {
        /// Pull mode: chunks are kept for an iterator. Push mode: they are dispatched.
        let keepsChunks: Bool
        /// The most bytes handed over and not consumed that an offer may bring the stream to
        /// (one chunk is always taken when nothing is outstanding, however large).
        let limit: Int
        /// A paused stream resumes once the outstanding bytes are down to this.
        let lowWater: Int

        /// Whether bytes may still come, and whether the transfer is paused.
        enum Flow {
            /// Open; `paused` is how to unpause the transfer while a refused offer waits.
            case open(paused: Resume?)
            /// Ended with the operation: `error` nil for a complete body; `errorDelivered` once
            /// an iterator was given the error.
            case ended(error: RequestError?, errorDelivered: Bool)
        }

        private(set) var flow: Flow = .open(paused: nil)
        /// The head, once handed over: from then on the operation is not retried.
        private(set) var head: ResponseHead?
        /// Pull mode: chunks not yet taken by the iterator.
        private var chunks = Deque<Data>()
        /// Bytes handed over and not yet consumed (pull: in `chunks`; push: dispatched, their
        /// handler not yet returned).
        private(set) var outstanding = 0
        /// The most bytes that were ever outstanding.
        private(set) var highWater = 0
        /// How many offers were refused.
        private(set) var pauseCount = 0
        private var headWaiter: HeadWaiter?
        private var chunkWaiter: ChunkWaiter?
        private var pauseWaiters: [PauseWaiter] = []

        init(keepsChunks: Bool, limit: Int, lowWater: Int) {
            self.keepsChunks = keepsChunks
            self.limit = max(1, limit)
            self.lowWater = min(max(0, lowWater), self.limit)
        }

        var hasEnded: Bool {
            if case .ended = flow { return true }
            return false
        }

        // MARK: Producer

        enum Begin {
            /// A head was handed over already, or the stream ended: nothing to do.
            case ignored
            /// Hand `head` to the consumer: resume `waiter` if one waits, run the head handler.
            case handOver(ResponseHead, to: HeadWaiter?)
        }

        /// The head of the response whose body is streamed arrived.
        mutating func begin(_ head: ResponseHead) -> Begin {
            guard self.head == nil, !hasEnded else { return .ignored }
            self.head = head
            defer { headWaiter = nil }
            return .handOver(head, to: headWaiter)
        }

        enum Offer {
            /// The stream ended: the bytes are dropped, and reported taken so that libcurl goes
            /// on to the end the engine is bringing about.
            case dropped
            /// Refused: the transfer pauses until `resume` is handed out; the pause waiters
            /// are resumed.
            case pause(waking: [PauseWaiter])
            /// Taken and handed to the waiting iterator.
            case hand(Data, to: ChunkWaiter)
            /// Taken and kept for the iterator.
            case kept
            /// Taken: dispatch it to the body handler, then report it consumed.
            case dispatch(Data)
        }

        /// The write callback offers `count` bytes; `chunk` copies them, only when taken.
        mutating func offer(count: Int, resume: Resume, chunk: () -> Data) -> Offer {
            guard !hasEnded else { return .dropped }
            if outstanding > 0, outstanding + count > limit {
                flow = .open(paused: resume)
                pauseCount += 1
                defer { pauseWaiters = [] }
                return .pause(waking: pauseWaiters)
            }
            flow = .open(paused: nil)  // an offer that is taken comes from a running transfer
            let data = chunk()
            if keepsChunks, let waiter = chunkWaiter {
                chunkWaiter = nil
                return .hand(data, to: waiter)
            }
            if keepsChunks { chunks.append(data) }
            outstanding += count
            highWater = max(highWater, outstanding)
            return keepsChunks ? .kept : .dispatch(data)
        }

        /// What to do when the stream ends.
        struct Finish {
            /// The consumer waiting for the head, and what it gets.
            var headWaiter: (HeadWaiter, Result<ResponseHead, RequestError>)?
            /// The iterator waiting for a chunk, and what it gets.
            var chunkWaiter: (ChunkWaiter, Result<Data?, RequestError>)?
            var pauseWaiters: [PauseWaiter] = []
            /// Push mode: a head never handed over before, for the head handler.
            var beginsNow: ResponseHead?
            /// Push mode: the body that was not streamed, for the body handler.
            var trailing: Data?
        }

        /// Ends the stream, once, with the operation's outcome: on success its head (handed
        /// over now if it never was: a bodiless response, or one kept in memory for the retry
        /// decision) and the body that was not streamed; on failure the error, after the chunks
        /// already handed over (dropped for ``RequestError/cancelled``). Nil when it had ended.
        mutating func finish(_ outcome: Result<(head: ResponseHead, body: Data), RequestError>) -> Finish? {
            guard !hasEnded else { return nil }
            var finish = Finish()
            var error: RequestError?
            switch outcome {
            case .success(let (head, body)):
                if self.head == nil {
                    self.head = head
                    finish.beginsNow = keepsChunks ? nil : head
                }
                if !body.isEmpty {
                    if keepsChunks { chunks.append(body) } else { finish.trailing = body }
                }
            case .failure(let failure):
                error = failure
                if failure == .cancelled {
                    chunks.removeAll()
                    outstanding = 0
                }
            }
            flow = .ended(error: error, errorDelivered: false)
            if let waiter = headWaiter {
                headWaiter = nil
                finish.headWaiter = (waiter, head.map { .success($0) } ?? .failure(error ?? .cancelled))
            }
            if let waiter = chunkWaiter, let value = take().value {
                chunkWaiter = nil
                finish.chunkWaiter = (waiter, value)
            }
            finish.pauseWaiters = pauseWaiters
            pauseWaiters = []
            return finish
        }

        // MARK: Consumer

        /// Push mode: a handler returned from a chunk of `count` bytes. Returns the refused
        /// offer's `resume` when the stream is now drained enough to unpause.
        mutating func consumed(_ count: Int) -> Resume? {
            outstanding = max(0, outstanding - count)
            return resumeIfDrained()
        }

        /// The head, or how the stream ended without one; nil after `waiter` was recorded.
        mutating func head(orWait waiter: HeadWaiter) -> Result<ResponseHead, RequestError>? {
            if let head { return .success(head) }
            if case .ended(let error, _) = flow { return .failure(error ?? .cancelled) }
            headWaiter = waiter
            return nil
        }

        /// Pull mode: the next chunk, nil at the end, or the error the stream ended with (once;
        /// the end after it); when none is there yet `waiter` is recorded. With it, the refused
        /// offer's `resume` when taking drained the stream enough to unpause.
        mutating func next(orWait waiter: ChunkWaiter) -> (value: Result<Data?, RequestError>?, resume: Resume?) {
            let taken = take()
            if taken.value == nil { chunkWaiter = waiter }
            return taken
        }

        /// True when the transfer is paused or the stream ended; otherwise `waiter` is recorded
        /// and resumed at the next refusal or the end.
        mutating func pausedOrEnded(orWait waiter: PauseWaiter) -> Bool {
            if case .open(paused: nil) = flow {
                pauseWaiters.append(waiter)
                return false
            }
            return true
        }

        private mutating func take() -> (value: Result<Data?, RequestError>?, resume: Resume?) {
            if let chunk = chunks.popFirst() {
                outstanding = max(0, outstanding - chunk.count)
                return (.success(chunk), resumeIfDrained())
            }
            guard case .ended(let error, let errorDelivered) = flow else { return (nil, nil) }
            if let error, !errorDelivered {
                flow = .ended(error: error, errorDelivered: true)
                return (.failure(error), nil)
            }
            return (.success(nil), nil)
        }

        private mutating func resumeIfDrained() -> Resume? {
            guard outstanding <= lowWater, case .open(let paused?) = flow else { return nil }
            flow = .open(paused: nil)
            return paused
        }
    }
}
