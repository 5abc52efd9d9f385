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
        }
    }
}
