@testable import CurlQueue
import CurlQueueTestHelpers
import Testing

/// The hand-over between a batch's operations and its consumers, driven with plain values:
/// waiters are strings, outcomes are integers.
@Suite struct RequestBatchStateMachineTests {
    typealias Machine = RequestBatch.StateMachine<String, Int>

    func taken(_ take: Machine.Take) -> Int? {
        if case .outcome(let outcome) = take { return outcome }
        return nil
    }

    func isEnd(_ take: Machine.Take) -> Bool {
        if case .end = take { return true }
        return false
    }

    func isWait(_ take: Machine.Take) -> Bool {
        if case .wait = take { return true }
        return false
    }

    @Test func outcomesDecidedWhileNobodyWaitsAreTakenInTheOrderDecided() {
        var machine = Machine(count: 3)
        for outcome in [20, 10, 30] {
            guard case .none = machine.decided(outcome) else { Issue.record("nobody waits: nothing to resume"); return }
        }
        #expect(machine.readyCount == 3)
        #expect(taken(machine.take()) == 20)
        #expect(taken(machine.take()) == 10)
        #expect(taken(machine.take()) == 30)
        #expect(isEnd(machine.take()))
        #expect(isEnd(machine.take()))  // and stays ended
    }

    @Test func aWaiterGetsTheNextOutcomeAndIsResumedOnce() {
        var machine = Machine(count: 2)
        #expect(isWait(machine.take()))
        #expect(isWait(machine.wait("a")))
        guard case .hand(let outcome, let waiter, let ending) = machine.decided(7) else {
            Issue.record("the waiter must get the outcome")
            return
        }
        #expect(outcome == 7 && waiter == "a" && ending.isEmpty)
        #expect(machine.readyCount == 0)  // handed, not kept
        // The waiter was taken out: the next outcome is kept for the next take.
        guard case .none = machine.decided(8) else { Issue.record("no waiter is left"); return }
        #expect(taken(machine.take()) == 8)
        #expect(isEnd(machine.take()))
    }

    @Test func aWaiterThatCameLateTakesWhatIsReadyInsteadOfWaiting() {
        var machine = Machine(count: 1)
        _ = machine.decided(5)
        #expect(taken(machine.wait("a")) == 5)
        #expect(isEnd(machine.wait("b")))
    }

    @Test func theLastOutcomeEndsTheOtherWaiters() {
        var machine = Machine(count: 1)
        #expect(isWait(machine.wait("a")))
        #expect(isWait(machine.wait("b")))
        #expect(isWait(machine.wait("c")))
        guard case .hand(let outcome, let waiter, let ending) = machine.decided(1) else {
            Issue.record("the first waiter must get the outcome")
            return
        }
        #expect(outcome == 1 && waiter == "a")
        #expect(ending == ["b", "c"])
        #expect(machine.allDecided)
        #expect(isEnd(machine.take()))
    }

    @Test func waitersAreServedFirstComeFirstServed() {
        var machine = Machine(count: 3)
        _ = machine.wait("a")
        _ = machine.wait("b")
        guard case .hand(_, let first, _) = machine.decided(1), case .hand(_, let second, _) = machine.decided(2) else {
            Issue.record("both waiters must be served")
            return
        }
        #expect(first == "a" && second == "b")
    }

    @Test func outcomesBeyondTheCountAreIgnoredAndAnEmptyBatchEndsAtOnce() {
        var machine = Machine(count: 1)
        _ = machine.decided(1)
        guard case .none = machine.decided(2) else { Issue.record("a second outcome must not reach anyone"); return }
        #expect(machine.readyCount == 1)
        var empty = Machine(count: 0)
        #expect(empty.allDecided)
        #expect(isEnd(empty.wait("a")))
    }

    @Test func onlyTheFirstCancelWithOutcomesStillToComeCancels() {
        var machine = Machine(count: 2)
        guard case .none = machine.decided(0) else { Issue.record("nobody waits"); return }
        let first = machine.cancel(), second = machine.cancel()
        #expect(first)
        #expect(machine.isCancelled)
        #expect(!second)
        // The cancelled operations' outcomes still come, and are taken as any other.
        guard case .none = machine.decided(1) else { Issue.record("nobody waits"); return }
        #expect(taken(machine.take()) == 0)
        #expect(taken(machine.take()) == 1)
        #expect(isEnd(machine.take()))

        var done = Machine(count: 1)
        guard case .none = done.decided(0) else { Issue.record("nobody waits"); return }
        let late = done.cancel()
        #expect(!late, "nothing is left to cancel once every outcome was decided")
        #expect(!done.isCancelled)
    }
}
