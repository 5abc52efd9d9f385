extension TokenRefresher {
    /// NitroConnection's hold-and-retry flow, as a value with no I/O in it.
    ///
    /// Requests are known by an ID. While no token request runs, a request goes out with the
    /// current token. The first 401 starts a token request; from then until it ends, every
    /// request that wants to go out, and every one that gets a 401, is held. The end of the
    /// token request releases them all at once: with the new token, or, when the caller gives
    /// up, with none (each then ends as it would have with no authenticator).
    ///
    /// `TokenRefresher` owns one, changes it under its lock, and performs what a transition
    /// returns after releasing the lock.
    struct StateMachine {
        enum State: Equatable {
            /// No token request runs; `token` is the one to send (nil: none yet, or given up).
            case idle(token: String?)
            /// A token request runs; `attempt` counts them in this flow, from 1.
            case refreshing(attempt: Int)
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
        }

        /// What to do after a request got a 401 with `sentToken`.
        enum UnauthorizedDecision: Equatable {
            /// A newer token than the one it sent is there already: send it again with it.
            case resend(token: String)
            /// Wait for the token request that runs.
            case hold
            /// Wait, and start the token request (attempt 1 of a new flow).
            case holdAndRequestToken
            /// The token it sent was dropped since by a flow that gave up: end with the 401, as
            /// the requests held for theirs did.
            case giveUp
        }

        /// How a held request is released.
        enum Release: Equatable {
            /// With this token (or with none, after a give-up, for requests that had not gone out).
            case send(token: String?)
            /// The flow gave up: a request held for its 401 ends with that 401.
            case giveUp
            /// It was cancelled while held: it is not sent.
            case cancelled
        }

        private(set) var state: State
        private(set) var held: [UInt64: HeldFor] = [:]

        init(token: String? = nil) {
            state = .idle(token: token)
        }

        var isRefreshing: Bool {
            if case .refreshing = state { return true }
            return false
        }

        mutating func willSend(_ id: UInt64) -> SendDecision {
            switch state {
            case .idle(let token):
                return .send(token: token)
            case .refreshing:
                held[id] = .sending
                return .hold
            }
        }

        mutating func unauthorized(_ id: UInt64, sentToken: String?) -> UnauthorizedDecision {
            switch state {
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
            return releaseAll { _ in .send(token: token) }
        }

        /// The token request failed, and the caller chose to try it again. Returns the
        /// attempt number of the next token request (nil if no flow runs).
        mutating func tokenFailedRetrying() -> Int? {
            guard case .refreshing(let attempt) = state else { return nil }
            state = .refreshing(attempt: attempt + 1)
            return attempt + 1
        }

        /// The token request failed and the caller gave up: the token is dropped; requests
        /// held for a 401 end with it, the others go out with no token.
        mutating func tokenFailedGivingUp() -> [(UInt64, Release)] {
            guard isRefreshing else { return [] }
            state = .idle(token: nil)
            return releaseAll { $0 == .unauthorized ? .giveUp : .send(token: nil) }
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
