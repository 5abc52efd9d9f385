import CurlQueue
@testable import CurlQueueClient
import CurlQueueTestHelpers
import Foundation
import Testing

/// The hold-and-retry flow, driven with a scripted token source: which requests wait, how many
/// token requests run, and how the held requests are released.
@Suite struct TokenRefresherTests {
    typealias Machine = TokenRefresher.StateMachine

    /// A fixed origin for the machine's time.
    let t0 = ContinuousClock.now

    /// The error the scripted token flows give up with.
    struct Refused: Error, Equatable {}

    /// A token source whose answers the test gives one at a time, counting the requests.
    final class ScriptedTokens: Sendable {
        private let calls = Locked<[Int]>([])
        private let started: AsyncStream<Int>.Continuation
        let starts: AsyncStream<Int>
        private let answers: AsyncStream<TokenRefresher.FetchOutcome>.Continuation
        private let answerStream: AsyncStream<TokenRefresher.FetchOutcome>

        init() {
            (starts, started) = AsyncStream.makeStream()
            (answerStream, answers) = AsyncStream.makeStream()
        }

        var attempts: [Int] { calls.withLock { $0 } }

        func answer(_ outcome: TokenRefresher.FetchOutcome) { answers.yield(outcome) }

        func fetch(_ attempt: Int) async -> TokenRefresher.FetchOutcome {
            calls.withLock { $0.append(attempt) }
            started.yield(attempt)
            var iterator = answerStream.makeAsyncIterator()
            return await iterator.next() ?? .giveUp(Refused())
        }
    }

    @Test func theMachineHoldsEveryoneWhileATokenRequestRunsAndReleasesThemTogether() {
        var machine = Machine(token: "old")
        #expect(machine.willSend(1, now: t0) == .send(token: "old"))
        #expect(machine.unauthorized(1, sentToken: "old", now: t0) == .holdAndRequestToken)
        #expect(machine.unauthorized(2, sentToken: "old", now: t0) == .hold)
        #expect(machine.willSend(3, now: t0) == .hold)
        let released = machine.tokenReceived("new")
        #expect(released.map(\.0) == [1, 2, 3])
        #expect(released.allSatisfy { $0.1 == .send(token: "new") })
        #expect(machine.state == .idle(token: "new"))
        // A 401 for the old token after the refresh: send again with the new one, no new flow.
        #expect(machine.unauthorized(4, sentToken: "old", now: t0) == .resend(token: "new"))
        // A 401 for the current token: it expired, a new flow starts.
        #expect(machine.unauthorized(5, sentToken: "new", now: t0) == .holdAndRequestToken)
    }

    @Test func givingUpEndsThe401sAndFailsTheOthersWithItsError() {
        var machine = Machine(token: nil)
        #expect(machine.unauthorized(1, sentToken: nil, now: t0) == .holdAndRequestToken)
        #expect(machine.willSend(2, now: t0) == .hold)
        #expect(machine.tokenFailedRetrying() == 2)
        #expect(machine.tokenFailedRetrying() == 3)
        let released = machine.tokenFailedGivingUp(Refused(), now: t0)
        #expect(released.count == 2)
        #expect(released[0] == (1, .giveUp) || released[0].1 == .giveUp)
        #expect(released[1].1 == .fail(Machine.FlowError(Refused()), retryAfter: .zero))
        #expect(machine.state == .idle(token: nil))
    }

    @Test func a401ForATokenAFlowGaveUpOnEndsWithItAndStartsNoTokenRequest() {
        var machine = Machine(token: "old")
        #expect(machine.willSend(1, now: t0) == .send(token: "old"))
        #expect(machine.willSend(2, now: t0) == .send(token: "old"))
        #expect(machine.unauthorized(1, sentToken: "old", now: t0) == .holdAndRequestToken)
        #expect(machine.tokenFailedGivingUp(Refused(), now: t0).map(\.1) == [.giveUp])
        // Request 2's 401 comes after the give-up: it ends as request 1 did. Before, it started
        // a token request of its own, with the credentials just refused.
        #expect(machine.unauthorized(2, sentToken: "old", now: t0) == .giveUp)
        #expect(machine.state == .idle(token: nil))
        #expect(machine.held.isEmpty)
        // A request sent with no token since then starts the flow again.
        #expect(machine.unauthorized(3, sentToken: nil, now: t0) == .holdAndRequestToken)
    }

    @Test func afterAGiveUpCallsFailFastWithItsErrorUntilTheBackoffHasPassedThenOneFlowStarts() {
        var machine = Machine(token: nil, backoff: .init(initial: .seconds(1), maximum: .seconds(8)))
        let refused = Machine.FlowError(Refused())
        #expect(machine.willSend(1, now: t0) == .send(token: nil))
        #expect(machine.willSend(2, now: t0) == .send(token: nil))
        #expect(machine.unauthorized(1, sentToken: nil, now: t0) == .holdAndRequestToken)
        #expect(machine.willSend(3, now: t0) == .hold)
        let released = machine.tokenFailedGivingUp(Refused(), now: t0)
        #expect(released.map(\.0) == [1, 3])
        #expect(released.map(\.1) == [.giveUp, .fail(refused, retryAfter: .seconds(1))])
        // During the backoff: a new call fails at once with the give-up's error, unsent; a
        // late 401 of the wave ends with itself. Neither starts a token request.
        #expect(machine.willSend(4, now: t0 + .milliseconds(400)) == .fail(refused, retryAfter: .milliseconds(600)))
        #expect(machine.unauthorized(2, sentToken: nil, now: t0 + .milliseconds(500)) == .giveUp)
        #expect(machine.state == .backingOff(until: t0 + .seconds(1), error: refused))
        #expect(machine.held.isEmpty)
        // After it: calls go out again, and the first 401 starts one flow; the others wait.
        #expect(machine.willSend(5, now: t0 + .seconds(1)) == .send(token: nil))
        #expect(machine.willSend(6, now: t0 + .seconds(1)) == .send(token: nil))
        // A 401 of the old wave that comes only now still starts nothing.
        #expect(machine.unauthorized(2, sentToken: nil, now: t0 + .seconds(2)) == .giveUp)
        #expect(machine.unauthorized(5, sentToken: nil, now: t0 + .seconds(2)) == .holdAndRequestToken)
        #expect(machine.unauthorized(6, sentToken: nil, now: t0 + .seconds(2)) == .hold)
        #expect(machine.tokenReceived("t").map(\.1) == [.send(token: "t"), .send(token: "t")])
    }

    @Test func repeatedGiveUpsBackOffExponentiallyUpToTheCapAndATokenResetsIt() {
        var machine = Machine(token: nil, backoff: .init(initial: .seconds(1), maximum: .seconds(5)))
        var now = t0
        var id: UInt64 = 0
        var backoffs: [Duration] = []
        // Each round: after the backoff, a call goes out, gets a 401, and its flow gives up.
        func giveUpOnce() {
            id += 1
            #expect(machine.willSend(id, now: now) == .send(token: nil))
            #expect(machine.unauthorized(id, sentToken: nil, now: now) == .holdAndRequestToken)
            _ = machine.tokenFailedGivingUp(Refused(), now: now)
            guard case .fail(_, let retryAfter) = machine.willSend(id + 1000, now: now) else {
                Issue.record("a call right after the give-up was not refused")
                return
            }
            backoffs.append(retryAfter)
            now += retryAfter
        }
        for _ in 0..<5 { giveUpOnce() }
        #expect(backoffs == [.seconds(1), .seconds(2), .seconds(4), .seconds(5), .seconds(5)])
        // A token resets it: the next give-up backs off 1 s again.
        id += 1
        #expect(machine.willSend(id, now: now) == .send(token: nil))
        #expect(machine.unauthorized(id, sentToken: nil, now: now) == .holdAndRequestToken)
        _ = machine.tokenReceived("t")
        #expect(machine.giveUpsInARow == 0)
        #expect(machine.unauthorized(id, sentToken: "t", now: now) == .holdAndRequestToken)  // expired
        _ = machine.tokenFailedGivingUp(Refused(), now: now)
        #expect(machine.willSend(id + 1, now: now) == .fail(Machine.FlowError(Refused()), retryAfter: .seconds(1)))
    }

    @Test func theRefresherFailsCallsFastDuringTheBackoffOnItsClockThenStartsOneFlow() async {
        let tokens = ScriptedTokens()
        let clock = Locked(t0)
        let refresher = TokenRefresher(token: nil, backoff: .init(initial: .seconds(10), maximum: .seconds(60)),
                                       now: { clock.withLock { $0 } }) { await tokens.fetch($0) }
        var starts = tokens.starts.makeAsyncIterator()
        let first = refresher.makeID()
        #expect(await refresher.tokenForSending(first) == .send(token: nil))
        async let unauthorized = refresher.tokenAfterUnauthorized(first, sentToken: nil)
        #expect(await starts.next() == 1)
        tokens.answer(.giveUp(Refused()))
        #expect(await unauthorized == .giveUp)
        // Nine seconds later the call still fails at once, with no token request.
        clock.withLock { $0 += .seconds(9) }
        #expect(await refresher.tokenForSending(refresher.makeID()) == .fail(Machine.FlowError(Refused()), retryAfter: .seconds(1)))
        #expect(tokens.attempts == [1])
        // Once the backoff has passed, a call goes out and its 401 starts one flow.
        clock.withLock { $0 += .seconds(1) }
        let later = refresher.makeID()
        #expect(await refresher.tokenForSending(later) == .send(token: nil))
        async let again = refresher.tokenAfterUnauthorized(later, sentToken: nil)
        #expect(await starts.next() == 1)
        tokens.answer(.token("t"))
        #expect(await again == .send(token: "t"))
        #expect(tokens.attempts == [1, 1])
    }

    @Test func aCancelledHeldRequestIsNotReleased() {
        var machine = Machine(token: "t")
        #expect(machine.unauthorized(1, sentToken: "t", now: t0) == .holdAndRequestToken)
        #expect(machine.willSend(2, now: t0) == .hold)
        #expect(machine.cancel(2) == .cancelled)
        #expect(machine.cancel(2) == nil)
        #expect(machine.cancel(7) == nil)
        #expect(machine.tokenReceived("u").map(\.0) == [1])
    }

    @Test func aHundredConcurrent401sMakeOneTokenRequestAndAllGoOutWithTheNewToken() async throws {
        let tokens = ScriptedTokens()
        let refresher = TokenRefresher(token: "expired") { await tokens.fetch($0) }
        let results = try await withThrowingTaskGroup(of: TokenRefresher.Release.self) { group in
            for _ in 0..<100 {
                let id = refresher.makeID()
                group.addTask { await refresher.tokenAfterUnauthorized(id, sentToken: "expired") }
            }
            // The first 401 starts the one token request; answer it once it has started.
            var starts = tokens.starts.makeAsyncIterator()
            #expect(await starts.next() == 1)
            tokens.answer(.token("fresh"))
            var results: [TokenRefresher.Release] = []
            for try await result in group { results.append(result) }
            return results
        }
        #expect(tokens.attempts == [1])
        #expect(results.count == 100)
        #expect(results.allSatisfy { $0 == .send(token: "fresh") })
        #expect(refresher.currentToken == "fresh")
    }

    @Test func tokenFailuresAreRetriedWhileTheCallerSaysSoThenEveryoneIsReleased() async {
        let tokens = ScriptedTokens()
        let (holds, held) = AsyncStream.makeStream(of: UInt64.self)
        let refresher = TokenRefresher(token: nil, didHold: { held.yield($0) }) { await tokens.fetch($0) }
        let first = refresher.makeID()
        async let unauthorized = refresher.tokenAfterUnauthorized(first, sentToken: nil)
        var starts = tokens.starts.makeAsyncIterator()
        #expect(await starts.next() == 1)
        // A request that wants to go out now waits too (once it is held: the flow must not
        // have given up before it asks).
        let second = refresher.makeID()
        async let sending = refresher.tokenForSending(second)
        var heldIDs = holds.makeAsyncIterator()
        #expect(await heldIDs.next() == first)
        #expect(await heldIDs.next() == second)
        tokens.answer(.retry)
        #expect(await starts.next() == 2)
        tokens.answer(.giveUp(Refused()))
        #expect(await unauthorized == .giveUp)
        #expect(await sending == .fail(Machine.FlowError(Refused()), retryAfter: .zero))
        #expect(tokens.attempts == [1, 2])
    }

    @Test func cancellingAHeldRequestReturnsAtOnceAndTheOthersStillGetTheToken() async {
        let tokens = ScriptedTokens()
        let refresher = TokenRefresher(token: "a") { await tokens.fetch($0) }
        let first = refresher.makeID()
        async let unauthorized = refresher.tokenAfterUnauthorized(first, sentToken: "a")
        var starts = tokens.starts.makeAsyncIterator()
        #expect(await starts.next() == 1)
        let held = Task { await refresher.tokenForSending(refresher.makeID()) }
        held.cancel()
        #expect(await held.value == .cancelled)
        tokens.answer(.token("b"))
        #expect(await unauthorized == .send(token: "b"))
    }

    @Test func aRequestAlreadyCancelledIsNeverHeld() async {
        let tokens = ScriptedTokens()
        let refresher = TokenRefresher(token: "a") { await tokens.fetch($0) }
        let first = refresher.makeID()
        async let unauthorized = refresher.tokenAfterUnauthorized(first, sentToken: "a")
        var starts = tokens.starts.makeAsyncIterator()
        #expect(await starts.next() == 1)
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await refresher.tokenForSending(refresher.makeID())
        }
        #expect(await task.value == .cancelled)
        tokens.answer(.token("b"))
        #expect(await unauthorized == .send(token: "b"))
    }
}
