import CurlQueue

/// Runs the hold-and-retry flow of one authenticator for every request it covers: at most one
/// token request at a time, however many requests get a 401 together.
///
/// Requests ask for a token before they go out (``tokenForSending(_:)``) and after a 401
/// (``tokenAfterUnauthorized(_:sentToken:)``); both may suspend while a token request runs.
/// A suspended request whose task is cancelled returns `.cancelled` at once and is not sent.
final class TokenRefresher: Sendable {
    /// How one token request ended.
    enum FetchOutcome: Sendable {
        case token(String)
        /// Failed; try the token request again.
        case retry
        /// Failed with this error; give up this flow.
        case giveUp(any Error)
    }

    typealias Release = StateMachine.Release

    private struct State {
        var machine: StateMachine
        var waiting: [UInt64: CheckedContinuation<Release, Never>] = [:]
        var nextID: UInt64 = 0
    }

    private let state: Locked<State>
    /// Makes one token request (attempt 1, 2, … of a flow). Never called with the lock held.
    private let fetchToken: @Sendable (_ attempt: Int) async -> FetchOutcome
    /// The time backoffs are measured on (tests set it).
    private let now: @Sendable () -> ContinuousClock.Instant
    /// Told the id of each request once it is held (tests wait for it); never with the lock held.
    private let didHold: @Sendable (UInt64) -> Void

    init(
        token: String?,
        backoff: StateMachine.Backoff = StateMachine.Backoff(initial: .zero, maximum: .zero),
        now: @escaping @Sendable () -> ContinuousClock.Instant = { .now },
        didHold: @escaping @Sendable (UInt64) -> Void = { _ in },
        fetchToken: @escaping @Sendable (_ attempt: Int) async -> FetchOutcome
    ) {
        state = Locked(State(machine: StateMachine(token: token, backoff: backoff)))
        self.now = now
        self.didHold = didHold
        self.fetchToken = fetchToken
    }

    /// The token requests go out with now (nil: none), unless a token request runs.
    var currentToken: String? {
        state.withLock { state in
            if case .idle(let token) = state.machine.state { return token }
            return nil
        }
    }

    func makeID() -> UInt64 {
        state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
    }

    /// The token request `id` goes out with: at once, or when the running token request ends;
    /// or `.fail` when a flow gave up and its backoff has not passed.
    func tokenForSending(_ id: UInt64) async -> Release {
        let time = now()
        return await hold(id) { machine in
            switch machine.willSend(id, now: time) {
            case .send(let token): return (.send(token: token), false)
            case .hold: return (nil, false)
            case .fail(let error, let retryAfter): return (.fail(error, retryAfter: retryAfter), false)
            }
        }
    }

    /// What request `id`, which got a 401 after sending `sentToken`, does next: go out again
    /// with a newer token, or end with its 401 (`.giveUp`). Starts the token request if none
    /// runs.
    func tokenAfterUnauthorized(_ id: UInt64, sentToken: String?) async -> Release {
        let time = now()
        return await hold(id) { machine in
            switch machine.unauthorized(id, sentToken: sentToken, now: time) {
            case .resend(let token): return (.send(token: token), false)
            case .hold: return (nil, false)
            case .holdAndRequestToken: return (nil, true)
            case .giveUp: return (.giveUp, false)
            }
        }
    }

    /// Decides under the lock; suspends if the decision is to hold; starts the token flow
    /// after releasing the lock if asked to.
    private func hold(
        _ id: UInt64,
        _ decide: @escaping @Sendable (inout StateMachine) -> (Release?, startFlow: Bool)
    ) async -> Release {
        let release = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Release, Never>) in
                let (now, startFlow) = state.withLock { state -> (Release?, Bool) in
                    // Cancelled before it could be held: it does not wait.
                    if Task.isCancelled { return (.cancelled, false) }
                    let (release, startFlow) = decide(&state.machine)
                    if release == nil { state.waiting[id] = continuation }
                    return (release, startFlow)
                }
                if let now { continuation.resume(returning: now) } else { didHold(id) }
                if startFlow { Task { await self.runFlow(attempt: 1) } }
            }
        } onCancel: {
            let continuation = state.withLock { state -> CheckedContinuation<Release, Never>? in
                guard state.machine.cancel(id) != nil else { return nil }
                return state.waiting.removeValue(forKey: id)
            }
            continuation?.resume(returning: .cancelled)
        }
        return release
    }

    /// Makes token requests until one gives a token or the caller gives up, then releases
    /// every held request.
    private func runFlow(attempt: Int) async {
        var attempt = attempt
        while true {
            let outcome = await fetchToken(attempt)
            let time = now()
            let released: [(CheckedContinuation<Release, Never>, Release)]? = state.withLock { state in
                let releases: [(UInt64, Release)]
                switch outcome {
                case .token(let token):
                    releases = state.machine.tokenReceived(token)
                case .giveUp(let error):
                    releases = state.machine.tokenFailedGivingUp(error, now: time)
                case .retry:
                    guard let next = state.machine.tokenFailedRetrying() else { return [] }
                    attempt = next
                    return nil
                }
                return releases.compactMap { id, release in
                    state.waiting.removeValue(forKey: id).map { ($0, release) }
                }
            }
            guard let released else { continue }
            for (continuation, release) in released { continuation.resume(returning: release) }
            return
        }
    }
}
