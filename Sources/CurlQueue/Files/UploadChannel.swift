import Dispatch
import Foundation

/// A streamed request body (``RequestBodyStream``) on its way from the caller's sequence to
/// libcurl, with the backpressure between them.
///
/// The producer is a task of CurlQueue's that iterates the sequence, started when the first
/// attempt is configured: ``write(_:)`` hands a chunk over, and waits (suspended, not blocking
/// a thread) while the bytes buffered and not yet taken would pass ``limit``. The consumer is
/// libcurl's read callback on the engine thread: ``read(into:resume:)`` copies what is buffered,
/// or, with nothing buffered, keeps the transfer's `resume` and has the callback return
/// `CURL_READFUNC_PAUSE`; the producer runs `resume` when it delivers (it only puts a command in
/// the engine's inbox) and the engine unpauses the transfer on its own thread.
///
/// Per body, hence per operation: the attempts of the one operation it was given to read it in
/// turn, and one that comes after a byte was taken is refused (the body cannot be sent again).
/// The operation's end closes it: the producer is resumed and its task cancelled. The decisions
/// are ``StateMachine``'s, under one lock (a leaf: nothing is called while it is held).
final class UploadChannel: Sendable {
    typealias Machine = StateMachine<CheckedContinuation<Bool, Never>, @Sendable () -> Void, Task<Void, Never>>
    /// Iterates the caller's sequence into the channel; returns false when it stopped because
    /// the channel refused a chunk (the body failed or the operation ended).
    typealias Produce = @Sendable (UploadChannel) async throws -> Bool

    /// The default limit of bytes buffered: 1 MiB, as for a streamed response.
    static let defaultLimit = 1 << 20
    /// The default low water, at which a waiting producer's chunk is taken: 256 KiB.
    static let defaultLowWater = 256 << 10

    let length: Int64?
    /// Internal, not private, for the tests' observations.
    let state: Locked<Machine>
    /// The sequence's iteration, taken out (once) by the producer's task: the caller's sequence
    /// is let go of there, never on the engine thread.
    private let produce: Locked<Produce?>
    /// The error the sequence threw, if it did.
    private let thrown = Locked<(any Error)?>(nil)

    init(length: Int64?, limit: Int = UploadChannel.defaultLimit, lowWater: Int = UploadChannel.defaultLowWater,
         produce: @escaping Produce) {
        self.length = length
        self.state = Locked(Machine(length: length, limit: limit, lowWater: lowWater))
        self.produce = Locked(produce)
    }

    /// The error the sequence threw, if it did.
    var producerError: (any Error)? { thrown.withLock { $0 } }

    /// Bytes libcurl took, over every attempt.
    var bytesTaken: Int64 { state.withLock { $0.taken } }

    // MARK: The engine (engine thread)

    /// An attempt of `operation` will send the body: the first starts the producer and has the
    /// channel closed when `operation` ends (through `onEnd`, which registers that).
    func attach(_ operation: ObjectIdentifier, onEnd: (@escaping @Sendable () -> Void) -> Void) throws(RequestError) {
        switch state.withLock({ $0.attach(operation) }) {
        case .proceed:
            return
        case .refuse(let error):
            throw error
        case .startProducer:
            onEnd { [self] in close() }
            startProducer()
        }
    }

    private func startProducer() {
        guard let produce = produce.withLock({ produce -> Produce? in
            defer { produce = nil }
            return produce
        }) else { return }
        // A task of its own: the sequence is the caller's code, which never runs on the engine thread.
        let task = Task { [self] in
            do {
                guard try await produce(self) else { return }
                state.withLock { $0.endOfSequence() }?()
            } catch {
                let failure = RequestError.transport(TransportFailure(
                    code: .readError, message: "the request body stream threw: \(String(describing: error))"))
                // Kept before the transfer can fail with it, so that whoever sees that failure finds it.
                thrown.withLock { $0 = error }
                let (fails, wake) = state.withLock { $0.producerFailed(failure) }
                if !fails { thrown.withLock { $0 = nil } }  // the operation had ended: that stopped it
                wake?()
            }
        }
        if let late = state.withLock({ $0.producerStarted(task) }) { Self.cancel(late) }
    }

    /// Copies buffered bytes for libcurl (see ``StateMachine/read(into:resume:)``).
    func read(into target: UnsafeMutableRawBufferPointer, resume: () -> @Sendable () -> Void) -> Machine.Read {
        let (read, wake) = state.withLock { $0.read(into: target, resume: resume) }
        wake?.resume(returning: true)
        return read
    }

    /// Nil when libcurl may rewind to `offset`, else why not.
    func rewind(to offset: Int64) -> RequestError? {
        state.withLock { $0.rewind(to: offset) }
    }

    /// The error for a retry of an operation whose body was partly sent, or nil when no byte was
    /// taken (the next attempt sends it from the start).
    func retryRefusal(after outcome: AttemptOutcome, attempt: Int) -> RequestError? {
        let cause = switch outcome {
        case .response(let response): "HTTP \(response.status.code)"
        case .failure(let error): "\(error)"
        }
        return state.withLock { machine in
            machine.taken > 0 ? machine.notReplayable(because: "attempt \(attempt) ended with \(cause): it is not retried") : nil
        }
    }

    // MARK: The producer (its task)

    /// Hands `chunk` over; waits while the buffer is full. False when the producer must stop.
    func write(_ chunk: Data) async -> Bool {
        await withCheckedContinuation { writer in
            switch state.withLock({ $0.write(chunk, writer: writer) }) {
            case .accepted(let wake):
                wake?()
                writer.resume(returning: true)
            case .wait(let watchers):
                for watcher in watchers { watcher.resume(returning: true) }
            case .stop(let wake):
                wake?()
                writer.resume(returning: false)
            }
        }
    }

    // MARK: The operation's end

    /// Drops what is buffered and stops the producer: a waiting write returns false and the
    /// task iterating the sequence is cancelled. From any thread, often the engine's; again: nothing.
    func close() {
        guard let close = state.withLock({ $0.close() }) else { return }
        for writer in close.writers { writer.resume(returning: false) }
        if let task = close.task { Self.cancel(task) }
    }

    /// Cancels the producer's task off the calling thread: cancelling runs the cancellation
    /// handlers of the sequence's `next()`, the caller's code, at once.
    private static func cancel(_ task: Task<Void, Never>) {
        DispatchQueue.global().async { task.cancel() }
    }
}
