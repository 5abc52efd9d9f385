import CurlQueue

extension TokenRefresher {
    /// NitroConnection's hold-and-retry flow, as a value with no I/O in it.
    ///
    /// Requests are known by an ID. While no token request runs, a request goes out with the
    /// current token. The first 401 starts a token request; from then until it ends, every
    /// request that wants to go out, and every one that gets a 401, is held. The end of the
    /// token request releases them all at once: with the new token, or, when the caller gives
    /// up, without one: a request held for its 401 ends with it, as it would have with no
    /// authenticator, and one that had not gone out fails with the give-up's error.
    ///
    /// A give-up starts a backoff: until it has passed, a request that wants to go out fails at
    /// once with the give-up's error, and a 401 ends with itself; none starts a token request.
    /// So a burst of calls against a token endpoint that keeps failing makes one flow's token
    /// requests, not one flow per wave of late 401s. Each give-up in a row doubles the backoff,
    /// up to its maximum; a token resets it. Time is passed in (`now`), so tests set it.
    ///
    /// `TokenRefresher` owns one, changes it under its lock, and performs what a transition
    /// returns after releasing the lock.
    struct StateMachine {
        enum State: Equatable {
            /// No token request runs; `token` is the one to send (nil: none yet, or given up).
            case idle(token: String?)
            /// A token request runs; `attempt` counts them in this flow, from 1.
            case refreshing(attempt: Int)
            /// A flow gave up with `error`; until `until`, no request goes out and no token
            /// request starts. Then it is `idle(token: nil)`.
            case backingOff(until: ContinuousClock.Instant, error: FlowError)
        }

        /// The error a flow gave up with (compared by its description, for tests).
        struct FlowError: Equatable, Sendable {
            let error: any Error

            init(_ error: any Error) { self.error = error }

            static func == (lhs: FlowError, rhs: FlowError) -> Bool {
                String(reflecting: lhs.error) == String(reflecting: rhs.error)
            }
        }

        /// How long no token request starts after a give-up: `initial` after the first,
        /// doubled after each further give-up in a row, at most `maximum`.
        struct Backoff: Equatable, Sendable {
            var initial: Duration
            var maximum: Duration

            /// The backoff after the `giveUps`-th give-up in a row (from 1).
            func delay(afterGiveUps giveUps: Int) -> Duration {
                var delay = max(initial, .zero)
                for _ in 1..<max(giveUps, 1) {
                    if delay >= maximum { break }
                    delay *= 2
                }
                return min(delay, max(maximum, .zero))
            }
        }

        /// Why a held request waits: it had not gone out yet, or it got a 401.
        enum HeldFor: Equatable {
            case sending
            case unauthorized
        }

        /// What to tell a request that asked to go out.
        enum SendDecision: Equatable {
            case send(token: String?)
            case hold
            /// A flow gave up less than the backoff ago: fail with its error, unsent.
            case fail(FlowError, retryAfter: Duration)
        }

        /// What to do after a request got a 401 with `sentToken`.
        enum UnauthorizedDecision: Equatable {
            /// A newer token than the one it sent is there already: send it again with it.
            case resend(token: String)
            /// Wait for the token request that runs.
            case hold
            /// Wait, and start the token request (attempt 1 of a new flow).
            case holdAndRequestToken
            /// The token it sent was dropped since by a flow that gave up, or a flow gave up less
            /// than the backoff ago: end with the 401, as the requests held for theirs did.
            case giveUp
        }

        /// How a held request is released.
        enum Release: Equatable {
            /// With this token.
            case send(token: String?)
            /// The flow gave up: a request held for its 401 ends with that 401.
            case giveUp
            /// The flow gave up: a request that had not gone out fails with its error, unsent.
            case fail(FlowError, retryAfter: Duration)
            /// It was cancelled while held: it is not sent.
            case cancelled
        }

        private(set) var state: State
        private(set) var held: [UInt64: HeldFor] = [:]
        /// Give-ups since the last token (or the start).
        private(set) var giveUpsInARow = 0
        /// The highest ID that went out with no token, and its value at the last give-up: a
        /// 401 to a request sent with none before that give-up belongs to the wave it answered.
        private var highestSentWithoutToken: UInt64 = 0
        private var sentWithoutTokenBeforeGiveUp: UInt64 = 0
        let backoff: Backoff

        init(token: String? = nil, backoff: Backoff = Backoff(initial: .zero, maximum: .zero)) {
            state = .idle(token: token)
            self.backoff = backoff
        }

        var isRefreshing: Bool {
            if case .refreshing = state { return true }
            return false
        }

        /// Ends a backoff that has passed by `now`.
        private mutating func endBackoff(now: ContinuousClock.Instant) {
            if case .backingOff(let until, _) = state, now >= until { state = .idle(token: nil) }
        }

        mutating func willSend(_ id: UInt64, now: ContinuousClock.Instant) -> SendDecision {
            endBackoff(now: now)
            switch state {
            case .backingOff(let until, let error):
                return .fail(error, retryAfter: until - now)
            case .idle(let token):
                if token == nil { highestSentWithoutToken = max(highestSentWithoutToken, id) }
                return .send(token: token)
            case .refreshing:
                held[id] = .sending
                return .hold
            }
        }

        mutating func unauthorized(_ id: UInt64, sentToken: String?, now: ContinuousClock.Instant) -> UnauthorizedDecision {
            endBackoff(now: now)
            switch state {
            case .backingOff:
                // A request that went out before the give-up: the flow answered its wave.
                return .giveUp
            case .refreshing:
                held[id] = .unauthorized
                return .hold
            case .idle(let token?) where token != sentToken:
                return .resend(token: token)
            case .idle(nil) where sentToken != nil:
                // Only a give-up drops a token. This 401 belongs to the wave that flow answered:
                // asking again with the credentials just refused would make a token request per
                // late 401. Requests sent since, with no token, start the flow again.
                return .giveUp
            case .idle(nil) where id <= sentWithoutTokenBeforeGiveUp:
                // Sent with no token before the last give-up, answered after it (and after its
                // backoff): that flow answered this wave too.
                return .giveUp
            case .idle:
                state = .refreshing(attempt: 1)
                held[id] = .unauthorized
                return .holdAndRequestToken
            }
        }

        /// The token request succeeded: every held request goes out with `token`.
        mutating func tokenReceived(_ token: String) -> [(UInt64, Release)] {
            guard isRefreshing else { return [] }
            state = .idle(token: token)
            giveUpsInARow = 0
            return releaseAll { _ in .send(token: token) }
        }

        /// The token request failed, and the caller chose to try it again. Returns the
        /// attempt number of the next token request (nil if no flow runs).
        mutating func tokenFailedRetrying() -> Int? {
            guard case .refreshing(let attempt) = state else { return nil }
            state = .refreshing(attempt: attempt + 1)
            return attempt + 1
        }

        /// The token request failed with `error` and the caller gave up: the token is dropped
        /// and the backoff starts; requests held for a 401 end with it, the others fail with
        /// `error`.
        mutating func tokenFailedGivingUp(_ error: any Error, now: ContinuousClock.Instant) -> [(UInt64, Release)] {
            guard isRefreshing else { return [] }
            giveUpsInARow += 1
            sentWithoutTokenBeforeGiveUp = highestSentWithoutToken
            let delay = backoff.delay(afterGiveUps: giveUpsInARow)
            let error = FlowError(error)
            state = delay > .zero ? .backingOff(until: now + delay, error: error) : .idle(token: nil)
            return releaseAll { $0 == .unauthorized ? .giveUp : .fail(error, retryAfter: delay) }
        }

        /// A held request was cancelled: it leaves at once (nil if it was not held).
        mutating func cancel(_ id: UInt64) -> Release? {
            held.removeValue(forKey: id) == nil ? nil : .cancelled
        }

        private mutating func releaseAll(_ release: (HeldFor) -> Release) -> [(UInt64, Release)] {
            let released = held.sorted { $0.key < $1.key }.map { ($0.key, release($0.value)) }
            held = [:]
            return released
        }
    }
}
