@testable import CurlQueue
import CurlQueueTestHelpers
import Foundation
import Testing

@Suite struct OperationStateMachineTests {
    typealias Machine = RequestOperation.StateMachine<Int>

    let ok = AttemptOutcome.response(Response(
        status: .ok, headerFields: [:], body: Data(), fileURL: nil, effectiveURL: nil,
        httpVersion: .http1_1, metrics: TransferMetrics(), attempts: 0))
    let refused = AttemptOutcome.failure(.transport(TransportFailure(code: .couldNotConnect, message: "")))

    func isComplete(_ action: Machine.Action) -> Bool {
        if case .complete = action { return true }
        return false
    }

    @Test func startingTwiceThrows() throws {
        var machine = Machine()
        _ = try machine.start(handle: 1, fromQueue: false)
        #expect(throws: Machine.StartError.alreadyStarted) { try machine.start(handle: 2, fromQueue: false) }
        #expect(throws: Machine.StartError.alreadyStarted) { try machine.enqueue() }
    }

    @Test func aQueuedOperationCannotBeStartedByHand() throws {
        var machine = Machine()
        try machine.enqueue()
        #expect(throws: Machine.StartError.alreadyStarted) { try machine.start(handle: 1, fromQueue: false) }
        guard case .startAttempt(1) = try machine.start(handle: 1, fromQueue: true) else {
            Issue.record("queue start did not start the transfer")
            return
        }
    }

    @Test func cancelAfterCompletionDoesNothing() throws {
        var machine = Machine()
        _ = try machine.start(handle: 1, fromQueue: false)
        #expect(isComplete(machine.attemptFinished(ok) { _ in nil }))
        guard case .none = machine.cancel() else {
            Issue.record("cancel after completion produced an action")
            return
        }
        guard case .none = machine.attemptFinished(ok, retryDelay: { _ in nil }) else {
            Issue.record("a second outcome produced an action")
            return
        }
    }

    @Test func cancelWhileRunningWaitsForTheEngineThenCompletesOnce() throws {
        var machine = Machine()
        _ = try machine.start(handle: 7, fromQueue: false)
        guard case .cancelAttempt(7) = machine.cancel() else {
            Issue.record("cancel did not ask the engine to drop the transfer")
            return
        }
        guard case .none = machine.cancel() else {
            Issue.record("second cancel produced an action")
            return
        }
        // Even a success that raced the cancel reports cancelled.
        guard case .complete(.failure(.cancelled)) = machine.attemptFinished(ok, retryDelay: { _ in nil }) else {
            Issue.record("cancelled operation did not complete with cancelled")
            return
        }
    }

    @Test func cancelDuringRetryWaitCompletesAtOnceAndTheTimerDoesNothing() throws {
        var machine = Machine()
        _ = try machine.start(handle: 1, fromQueue: false)
        guard case .scheduleRetry(1, .seconds(1)) = machine.attemptFinished(refused, retryDelay: { _ in .seconds(1) }) else {
            Issue.record("no retry scheduled")
            return
        }
        #expect(isComplete(machine.cancel()))
        guard case .none = machine.retryTimerFired(attempt: 1, handle: 2) else {
            Issue.record("timer restarted a cancelled operation")
            return
        }
    }

    @Test func retriesCountAttemptsAndTheLastOutcomeCompletes() throws {
        var machine = Machine()
        _ = try machine.start(handle: 1, fromQueue: false)
        var attempts: [Int] = []
        for handle in 2...3 {
            _ = machine.attemptFinished(refused) { attempt in attempts.append(attempt); return .zero }
            guard case .startAttempt(handle) = machine.retryTimerFired(attempt: handle - 1, handle: handle) else {
                Issue.record("retry \(handle) did not start")
                return
            }
        }
        guard case .complete(.success(let response)) = machine.attemptFinished(ok, retryDelay: { _ in nil }) else {
            Issue.record("no completion")
            return
        }
        #expect(attempts == [1, 2])
        #expect(response.attempts == 3)
    }

    @Test func aCancelledQueuedOperationIsNotStartedByTheQueue() throws {
        var machine = Machine()
        try machine.enqueue()
        #expect(isComplete(machine.cancel()))
        guard case .none = try machine.start(handle: 1, fromQueue: true) else {
            Issue.record("cancelled operation started")
            return
        }
    }

    /// The machine is the one source of truth for "finished": `result`, `isFinished` and
    /// `isCancelled` all come from its state, and the outcome is kept by the same transition
    /// that returns `.complete`.
    @Test func theDecidedOutcomeIsTheMachines() throws {
        var machine = Machine()
        _ = try machine.start(handle: 1, fromQueue: false)
        #expect(machine.result == nil && !machine.isFinished && !machine.isCancelled)
        let withBody = AttemptOutcome.response(Response(
            status: .ok, headerFields: [:], body: Data("body".utf8), fileURL: nil, effectiveURL: nil,
            httpVersion: .http1_1, metrics: TransferMetrics(), attempts: 0))
        guard case .complete(.success(let delivered)) = machine.attemptFinished(withBody, retryDelay: { _ in nil }) else {
            Issue.record("no completion")
            return
        }
        #expect(delivered.body == Data("body".utf8) && delivered.attempts == 1)
        #expect(machine.isFinished && !machine.isCancelled)
        #expect(try machine.result?.get().body == Data("body".utf8))
        // Nothing later changes it.
        _ = machine.cancel()
        _ = machine.attemptFinished(refused) { _ in nil }
        #expect(try machine.result?.get().status == .ok && !machine.isCancelled)
    }

    /// A body that went to a stream: the stream gets the whole outcome with `.complete`, the
    /// kept one (what the completion handler and `response()` get) has no body.
    @Test func aStreamedBodyIsNotKeptInTheOutcome() throws {
        var machine = Machine()
        _ = try machine.start(handle: 1, fromQueue: false)
        let withBody = AttemptOutcome.response(Response(
            status: .ok, headerFields: [:], body: Data("held for a retry".utf8), fileURL: nil, effectiveURL: nil,
            httpVersion: .http1_1, metrics: TransferMetrics(), attempts: 0))
        guard case .complete(.success(let delivered)) = machine.attemptFinished(withBody, streamsBody: true, retryDelay: { _ in nil }) else {
            Issue.record("no completion")
            return
        }
        #expect(delivered.body == Data("held for a retry".utf8))
        #expect(try machine.result?.get().body == Data())
    }

    /// Cancelled is read from the outcome: a cancel before, during and after an attempt, and an
    /// attempt that itself failed with `cancelled`.
    @Test func cancelledIsWhatTheOutcomeSays() throws {
        var idle = Machine()
        _ = idle.cancel()
        #expect(idle.isCancelled && idle.isFinished && idle.result?.failure == .cancelled)

        var running = Machine()
        _ = try running.start(handle: 1, fromQueue: false)
        _ = running.cancel()
        #expect(running.isCancelled && !running.isFinished && running.result == nil)
        _ = running.attemptFinished(ok) { _ in nil }
        #expect(running.isCancelled && running.isFinished && running.result?.failure == .cancelled)

        var failed = Machine()
        _ = try failed.start(handle: 1, fromQueue: false)
        _ = failed.attemptFinished(.failure(.cancelled)) { _ in nil }
        #expect(failed.isCancelled && failed.result?.failure == .cancelled)

        var refusedOnce = Machine()
        _ = try refusedOnce.start(handle: 1, fromQueue: false)
        _ = refusedOnce.attemptFinished(refused) { _ in nil }
        #expect(!refusedOnce.isCancelled && refusedOnce.isFinished)
    }

    /// Progress goes to the handlers only when it moves forward, across attempts: a retry that
    /// starts from 0 again is not reported until it passes the last value; no download value
    /// before the head (nil); a value with no handler is not recorded.
    @Test func progressOnlyMovesForwardAcrossAttempts() throws {
        var machine = Machine()
        func p(_ bytes: Int64, _ total: Int64? = 100) -> TransferProgress { TransferProgress(bytesTransferred: bytes, totalBytes: total) }
        _ = try machine.start(handle: 1, fromQueue: false)
        var reported = machine.progressed(download: nil, upload: p(10), reportsDownload: true, reportsUpload: true)
        #expect(reported.download == nil && reported.upload == p(10))
        reported = machine.progressed(download: p(40), upload: p(10), reportsDownload: true, reportsUpload: true)
        #expect(reported.download == p(40) && reported.upload == nil)  // the same upload twice: not again
        _ = machine.attemptFinished(refused) { _ in .zero }
        _ = machine.retryTimerFired(attempt: 1, handle: 2)
        reported = machine.progressed(download: p(5, 120), upload: p(10), reportsDownload: true, reportsUpload: true)
        #expect(reported.download == nil && reported.upload == nil)  // the retry starts over: not backwards
        reported = machine.progressed(download: p(40, 120), upload: p(10), reportsDownload: true, reportsUpload: true)
        #expect(reported.download == p(40, 120))  // same bytes, a new total
        reported = machine.progressed(download: p(90, 120), upload: p(20), reportsDownload: false, reportsUpload: true)
        #expect(reported.download == nil && reported.upload == p(20) && machine.lastDownload == p(40, 120))
    }

    /// A pending operation stays small (a queue may hold 100,000): moving the outcome and the
    /// progress filter into the machine did not grow it (250 bytes before, with the outcome
    /// boxed beside the machine; 248 after; 256 with `lastRetried`; 240 with the one-byte
    /// fields packed after the machine; 248 with the queue's metrics instruments, and with its spans
    /// beside them in one word, `Observers`: 256 as a field of its own). A new field fits
    /// in the bound or is boxed.
    @Test func anOperationsStateDoesNotGrow() {
        #expect(MemoryLayout<RequestOperation.State>.size <= 248, "\(MemoryLayout<RequestOperation.State>.size) bytes")
    }

    /// Random event sequences: whatever happens, exactly one completion.
    @Test func everyRandomSequenceCompletesExactlyOnce() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            var machine = Machine()
            var completions = 0
            var nextHandle = 1
            func count(_ action: Machine.Action) { if case .complete = action { completions += 1 } }
            if Bool.random(using: &generator) { try machine.enqueue() }
            for _ in 0..<8 {
                switch Int.random(in: 0..<5, using: &generator) {
                case 0: count(machine.cancel())
                case 1: count((try? machine.start(handle: nextHandle, fromQueue: Bool.random())) ?? .none)
                case 2: count(machine.attemptFinished(Bool.random() ? ok : refused) { _ in Bool.random() ? .zero : nil })
                case 3:
                    nextHandle += 1
                    count(machine.retryTimerFired(attempt: nextHandle - 1, handle: nextHandle))
                default: count(machine.attemptFinished(.failure(.cancelled)) { _ in nil })
                }
            }
            count(machine.cancel())
            count(machine.attemptFinished(ok) { _ in nil })
            #expect(completions == 1)
            #expect(machine.isFinished && machine.result != nil)
            #expect(machine.isCancelled == (machine.result?.failure == .cancelled))
        }
    }
}
