import DequeModule
import Foundation

extension UploadChannel {
    /// Everything that decides what a streamed request body does, as a value with no I/O and no
    /// lock in it: whether its producer runs, the bytes produced and not yet taken by libcurl, the
    /// producer waiting for room, the transfer paused for want of bytes, and how the body ended.
    ///
    /// `UploadChannel` owns one, changes it under its lock and performs the returned action after
    /// releasing it. Three parties race: the producer (a task iterating the caller's sequence),
    /// the engine (libcurl's read callback, a new attempt) and the operation's end (a cancel, a
    /// failure, a response that came before the body's end). Whatever their order: the producer
    /// is started at most once and woken exactly once per wait; a paused transfer's `resume` is
    /// handed out at most once; no byte is taken twice or after the end; bytes buffered stay at or
    /// under `limit` (one chunk is always taken when the buffer is empty, however large).
    ///
    /// Generic over the waiting producer (a continuation), the transfer's `resume` and the
    /// producer's task, so that tests drive it with plain values.
    struct StateMachine<Writer: Sendable, Resume: Sendable, Producer: Sendable>: Sendable {
        /// The bytes produced and not yet taken, in order.
        struct Buffer: Sendable {
            var chunks = Deque<Data>()
            /// Bytes of the first chunk already taken.
            var offset = 0
            /// Bytes not yet taken.
            var count = 0
        }

        /// While the producer iterates the sequence.
        struct Producing: Sendable {
            var buffer = Buffer()
            /// The producer, waiting with a chunk that does not fit yet.
            var waiting: (writer: Writer, chunk: Data)?
            /// libcurl found nothing to read: run this (once) when bytes or the end come.
            var paused: Resume?
            /// The producer's task, once started (cancelled when the operation ends first).
            var task: Producer?
        }

        enum Phase: Sendable {
            /// No attempt asked for the body yet: the sequence is not iterated.
            case idle
            /// The producer iterates the sequence.
            case producing(Producing)
            /// The sequence ended; libcurl takes what the buffer still holds, then the end.
            case ended(Buffer)
            /// The producer threw, or its bytes did not match the announced length: the transfer
            /// fails with this error.
            case failed(RequestError)
            /// The operation ended: nothing more is taken or produced.
            case closed
        }

        /// The announced length (`Content-Length`), or nil for a body sent chunked.
        let length: Int64?
        /// The most bytes buffered that a chunk may bring the buffer to.
        let limit: Int
        /// A waiting producer's chunk is taken once the buffer is down to this.
        let lowWater: Int

        private(set) var phase: Phase = .idle
        /// The operation the body was given to (its attempts may read it; no other operation).
        private(set) var owner: ObjectIdentifier?
        /// Bytes libcurl took, over every attempt: past 0 the body cannot be sent again.
        private(set) var taken: Int64 = 0
        /// Bytes the producer handed over (buffered or taken).
        private(set) var produced: Int64 = 0
        /// Observations, for the tests: the most bytes ever buffered, and how often the
        /// producer had to wait for room.
        private(set) var highWater = 0
        private(set) var producerWaits = 0
        /// Observers resumed (true) the next time the producer waits for room, or (false) at the end.
        private var waitWatchers: [Writer] = []

        init(length: Int64?, limit: Int, lowWater: Int) {
            self.length = length
            self.limit = max(1, limit)
            self.lowWater = min(max(0, lowWater), self.limit)
        }

        // MARK: The engine

        enum Attach: Equatable {
            /// The first attempt: start the producer.
            case startProducer
            /// A later attempt or run of the owner, with no byte taken yet: read on.
            case proceed
            /// Fail the attempt with this error, unsent.
            case refuse(RequestError)
        }

        /// An attempt of operation `operation` is configured to send the body.
        mutating func attach(_ operation: ObjectIdentifier) -> Attach {
            guard let owner else {
                guard case .idle = phase else { preconditionFailure("a body with no owner has left idle") }
                owner = operation
                phase = .producing(Producing())
                return .startProducer
            }
            guard owner == operation else {
                return .refuse(.invalidRequest("the request body stream was given to another operation: a stream is sent by one operation, once"))
            }
            if case .closed = phase { return .refuse(.cancelled) }
            if taken > 0 { return .refuse(notReplayable(because: "it is sent again whole")) }
            return .proceed
        }

        /// The producer's task was made: kept, or handed back to be cancelled when the
        /// operation ended meanwhile.
        mutating func producerStarted(_ task: Producer) -> Producer? {
            switch phase {
            case .producing(var producing):
                producing.task = task
                phase = .producing(producing)
                return nil
            case .closed:
                return task
            case .ended, .failed:
                return nil  // it ran to its end already
            case .idle:
                preconditionFailure("a producer started before the body was attached")
            }
        }

        enum Read: Equatable {
            /// `count` bytes were copied; `last` when they end a body of announced length.
            case bytes(Int, last: Bool)
            /// No bytes buffered: the transfer pauses until `resume` runs.
            case pause
            /// The body ended: 0 bytes.
            case end
            /// Abort the transfer with this error.
            case fail(RequestError)
        }

        /// libcurl asks for up to `target.count` bytes. `resume` makes the closure that
        /// unpauses the transfer, called only when it pauses. With the bytes copied, the
        /// waiting producer to wake (its chunk was taken into the buffer).
        mutating func read(into target: UnsafeMutableRawBufferPointer, resume: () -> Resume) -> (Read, wake: Writer?) {
            switch phase {
            case .producing(var producing):
                guard producing.buffer.count > 0 else {
                    producing.paused = resume()
                    phase = .producing(producing)
                    return (.pause, nil)
                }
                let count = copy(from: &producing.buffer, into: target)
                var wake: Writer?
                if case let (writer, chunk)? = producing.waiting, fits(chunk.count, after: producing.buffer.count, waking: true) {
                    append(chunk, to: &producing.buffer)
                    producing.waiting = nil
                    wake = writer
                }
                phase = .producing(producing)
                return (.bytes(count, last: taken == length), wake)
            case .ended(var buffer):
                guard buffer.count > 0 else { return (.end, nil) }
                let count = copy(from: &buffer, into: target)
                phase = .ended(buffer)
                return (.bytes(count, last: taken == length), nil)
            case .failed(let error):
                return (.fail(error), nil)
            case .closed:
                return (.fail(.cancelled), nil)
            case .idle:
                preconditionFailure("libcurl read a body that was not attached")
            }
        }

        /// libcurl asks to rewind to `offset` (a 307/308 redirect, a resend on a new
        /// connection): possible only to 0, and only while no byte was taken.
        func rewind(to offset: Int64) -> RequestError? {
            offset == 0 && taken == 0 ? nil : notReplayable(because: "a redirect or a new connection asks for it again whole")
        }

        /// The error of a streamed body that was partly sent and is needed again whole.
        func notReplayable(because reason: String) -> RequestError {
            .invalidRequest("the request body is a stream of which \(taken) bytes were sent: it cannot be sent again, and \(reason)")
        }

        // MARK: The producer

        enum Write {
            /// Taken into the buffer: the producer goes on; unpause the transfer with `wake`.
            case accepted(wake: Resume?)
            /// No room yet: the writer was kept with its chunk, and is resumed (true) once
            /// it is taken, or (false) when the operation ends. Resume `watchers` (true).
            case wait(watchers: [Writer])
            /// The body failed or the operation ended: the producer stops (false); unpause the
            /// transfer with `wake` so that it sees the failure.
            case stop(wake: Resume?)
        }

        /// The producer hands over a chunk (not empty).
        mutating func write(_ chunk: Data, writer: Writer) -> Write {
            switch phase {
            case .producing(var producing):
                precondition(producing.waiting == nil, "a producer wrote while it waited")
                if let length, produced + Int64(chunk.count) > length {
                    phase = .failed(.invalidRequest(
                        "the request body stream produced more than its announced length of \(length) bytes"))
                    return .stop(wake: producing.paused)
                }
                guard fits(chunk.count, after: producing.buffer.count, waking: false) else {
                    producing.waiting = (writer, chunk)
                    producerWaits += 1
                    phase = .producing(producing)
                    defer { waitWatchers = [] }
                    return .wait(watchers: waitWatchers)
                }
                append(chunk, to: &producing.buffer)
                let wake = producing.paused
                producing.paused = nil
                phase = .producing(producing)
                return .accepted(wake: wake)
            case .failed, .closed:
                return .stop(wake: nil)
            case .idle, .ended:
                preconditionFailure("a producer wrote to a body that is not producing")
            }
        }

        /// The sequence ended. Returns the paused transfer's `resume`, to take the end.
        mutating func endOfSequence() -> Resume? {
            switch phase {
            case .producing(let producing):
                precondition(producing.waiting == nil, "a producer ended while it waited")
                if let length, produced != length {
                    phase = .failed(.invalidRequest(
                        "the request body stream ended after \(produced) bytes; it announced a length of \(length)"))
                } else {
                    phase = .ended(producing.buffer)
                }
                return producing.paused
            case .closed:
                return nil
            case .idle, .ended, .failed:
                preconditionFailure("a producer ended a body that is not producing")
            }
        }

        /// The sequence threw `error`: whether that fails the body (not when the operation had
        /// ended, which stopped it), and the paused transfer's `resume`, to fail.
        mutating func producerFailed(_ error: RequestError) -> (fails: Bool, wake: Resume?) {
            switch phase {
            case .producing(let producing):
                phase = .failed(error)
                return (true, producing.paused)
            case .closed:
                return (false, nil)
            case .idle, .ended, .failed:
                preconditionFailure("a producer failed a body that is not producing")
            }
        }

        // MARK: The operation

        /// For the tests: true when the producer waits for room now; false when the body is
        /// past producing; otherwise nil and `watcher` is resumed at the next wait (or the end).
        mutating func producerWaits(orWatch watcher: Writer) -> Bool? {
            switch phase {
            case .producing(let producing) where producing.waiting != nil: return true
            case .idle, .producing:
                waitWatchers.append(watcher)
                return nil
            case .ended, .failed, .closed: return false
            }
        }

        /// What to do when the operation ends.
        struct Close {
            /// The waiting producer and the watchers, to resume with false.
            var writers: [Writer] = []
            /// The producer's task, to cancel.
            var task: Producer?
        }

        /// The operation ended (any outcome): the buffer is dropped, the producer stopped. Nil
        /// when it had been closed.
        mutating func close() -> Close? {
            defer {
                phase = .closed
                waitWatchers = []
            }
            switch phase {
            case .producing(let producing):
                return Close(writers: (producing.waiting.map { [$0.writer] } ?? []) + waitWatchers, task: producing.task)
            case .idle, .ended, .failed:
                return Close(writers: waitWatchers)
            case .closed:
                return nil
            }
        }

        // MARK: Helpers

        /// Whether a chunk of `count` bytes may join a buffer holding `buffered`: always into an
        /// empty one, else within the limit — and, for a producer that waits, only once the
        /// buffer is down to the low water (so that it is woken once per batch, not per read).
        private func fits(_ count: Int, after buffered: Int, waking: Bool) -> Bool {
            if buffered == 0 { return true }
            if waking, buffered > lowWater { return false }
            return buffered + count <= limit
        }

        private mutating func append(_ chunk: Data, to buffer: inout Buffer) {
            buffer.chunks.append(chunk)
            buffer.count += chunk.count
            produced += Int64(chunk.count)
            highWater = max(highWater, buffer.count)
        }

        private mutating func copy(from buffer: inout Buffer, into target: UnsafeMutableRawBufferPointer) -> Int {
            var copied = 0
            while copied < target.count, let first = buffer.chunks.first {
                let n = min(target.count - copied, first.count - buffer.offset)
                first.withUnsafeBytes { source in
                    (target.baseAddress! + copied).copyMemory(from: source.baseAddress! + buffer.offset, byteCount: n)
                }
                copied += n
                buffer.offset += n
                if buffer.offset == first.count {
                    buffer.chunks.removeFirst()
                    buffer.offset = 0
                }
            }
            buffer.count -= copied
            taken += Int64(copied)
            return copied
        }
    }
}
