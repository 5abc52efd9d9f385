@testable import CurlQueue
import Foundation
import Testing

/// The hold-and-retry flow, driven with a scripted token source: which requests wait, how many
/// token requests run, and how the held requests are released.
@Suite struct TokenRefresherTests {
    typealias Machine = TokenRefresher.StateMachine

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
            return await iterator.next() ?? .giveUp
        }
    }

    @Test func theMachineHoldsEveryoneWhileATokenRequestRunsAndReleasesThemTogether() {
        var machine = Machine(token: "old")
        #expect(machine.willSend(1) == .send(token: "old"))
        #expect(machine.unauthorized(1, sentToken: "old") == .holdAndRequestToken)
        #expect(machine.unauthorized(2, sentToken: "old") == .hold)
        #expect(machine.willSend(3) == .hold)
        let released = machine.tokenReceived("new")
        #expect(released.map(\.0) == [1, 2, 3])
        #expect(released.allSatisfy { $0.1 == .send(token: "new") })
        #expect(machine.state == .idle(token: "new"))
        // A 401 for the old token after the refresh: send again with the new one, no new flow.
        #expect(machine.unauthorized(4, sentToken: "old") == .resend(token: "new"))
        // A 401 for the current token: it expired, a new flow starts.
        #expect(machine.unauthorized(5, sentToken: "new") == .holdAndRequestToken)
    }

    @Test func givingUpEndsThe401sAndLetsTheOthersGoWithoutAToken() {
        var machine = Machine(token: nil)
        #expect(machine.unauthorized(1, sentToken: nil) == .holdAndRequestToken)
        #expect(machine.willSend(2) == .hold)
        #expect(machine.tokenFailedRetrying() == 2)
        #expect(machine.tokenFailedRetrying() == 3)
        let released = machine.tokenFailedGivingUp()
        #expect(released.count == 2)
        #expect(released[0] == (1, .giveUp) || released[0].1 == .giveUp)
        #expect(released[1].1 == .send(token: nil))
        #expect(machine.state == .idle(token: nil))
    }

    @Test func a401ForATokenAFlowGaveUpOnEndsWithItAndStartsNoTokenRequest() {
        var machine = Machine(token: "old")
        #expect(machine.willSend(1) == .send(token: "old"))
        #expect(machine.willSend(2) == .send(token: "old"))
        #expect(machine.unauthorized(1, sentToken: "old") == .holdAndRequestToken)
        #expect(machine.tokenFailedGivingUp().map(\.1) == [.giveUp])
        // Request 2's 401 comes after the give-up: it ends as request 1 did. Before, it started
        // a token request of its own, with the credentials just refused.
        #expect(machine.unauthorized(2, sentToken: "old") == .giveUp)
        #expect(machine.state == .idle(token: nil))
        #expect(machine.held.isEmpty)
        // A request sent with no token since then starts the flow again.
        #expect(machine.unauthorized(3, sentToken: nil) == .holdAndRequestToken)
    }

    @Test func aCancelledHeldRequestIsNotReleased() {
        var machine = Machine(token: "t")
        #expect(machine.unauthorized(1, sentToken: "t") == .holdAndRequestToken)
        #expect(machine.willSend(2) == .hold)
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
        let refresher = TokenRefresher(token: nil) { await tokens.fetch($0) }
        let first = refresher.makeID()
        async let unauthorized = refresher.tokenAfterUnauthorized(first, sentToken: nil)
        var starts = tokens.starts.makeAsyncIterator()
        #expect(await starts.next() == 1)
        // A request that wants to go out now waits too.
        let second = refresher.makeID()
        async let sending = refresher.tokenForSending(second)
        tokens.answer(.retry)
        #expect(await starts.next() == 2)
        tokens.answer(.giveUp)
        #expect(await unauthorized == .giveUp)
        #expect(await sending == .send(token: nil))
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
