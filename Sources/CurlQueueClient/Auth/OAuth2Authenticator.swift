public import CurlQueue
public import Foundation
public import HTTPTypes

/// NitroConnection's OAuth2 flow: requests to the URLs it covers carry
/// `Authorization: Bearer <token>`; a 401 fetches a new token and sends them again.
///
/// The contract, whatever the concurrency:
/// - Every covered request that gets 401 is held, and so is every covered request that wants
///   to go out while a token request runs. There is at most one token request at a time:
///   100 requests that get 401 together cause one.
/// - When the token request succeeds, every held request still wanted is sent again with the
///   new token. A held request whose task is cancelled ends at once and is not sent.
/// - When it fails, ``TokenFailureDecision`` from `onTokenFailure` decides: try the token
///   request again, or give up. On give-up, each request held for its 401 ends with that 401,
///   as it would have with no authenticator, and the others fail with ``TokenUnavailableError``
///   without being sent. So does a request sent before the give-up whose 401 comes after it:
///   no token request.
/// - A give-up starts a backoff (``GiveUpBackoff``, 1 s doubling to 1 min by default): until
///   it has passed, covered requests fail at once with ``TokenUnavailableError`` and no token
///   request starts. A burst of calls against a token endpoint that fails makes at most one
///   flow's token requests (three with the default decision) per backoff.
/// - An expired token starts the flow again at the next 401. A request is sent at most
///   ``maxResendsPerRequest`` + 1 times, so a server that answers 401 to every token ends.
/// - The token request itself goes straight to the queue, never through the authenticator
///   (it carries `Authorization: Basic …` from `credentials`).
///
/// Tokens live in memory; with a ``TokenStore`` they are loaded from it at start and saved
/// to it after each token request that succeeds.
public final class OAuth2Authenticator: Sendable {
    /// What `onTokenFailure` chooses after a token request failed.
    public enum TokenFailureDecision: Sendable {
        /// Make the token request again.
        case retry
        /// Give up: the held requests end as described on ``OAuth2Authenticator``.
        case giveUp
    }

    /// A token request that failed.
    public struct TokenFailure: Sendable {
        /// Which token request of this flow failed, from 1.
        public var attempt: Int
        /// The response, when there was one (a non-2xx status, or a body `parseToken` refused).
        public var response: Response?
        /// What went wrong.
        public var error: any Error
    }

    /// How long covered requests fail at once after the token flow gave up.
    ///
    /// After a give-up, until the backoff has passed, a covered request is not sent: it fails
    /// with ``TokenUnavailableError``, and a 401 to one sent before the give-up ends with that
    /// 401; neither starts a token request. The first request after the backoff may start one
    /// flow again. The backoff is `initial` after a give-up, doubled after each further give-up
    /// in a row, at most `maximum`; a token received resets it. `.zero` turns it off (each wave
    /// of 401s may then start a flow).
    public struct GiveUpBackoff: Sendable, Hashable {
        /// The backoff after the first give-up in a row.
        public var initial: Duration
        /// The longest backoff.
        public var maximum: Duration

        /// A backoff of `initial`, doubling up to `maximum` (negative values count as zero).
        public init(initial: Duration, maximum: Duration) {
            self.initial = initial
            self.maximum = maximum
        }

        /// 1 second, doubling up to 1 minute.
        public static let standard = GiveUpBackoff(initial: .seconds(1), maximum: .seconds(60))
        /// No backoff.
        public static let zero = GiveUpBackoff(initial: .zero, maximum: .zero)
    }

    /// The username and password sent on the token request as `Authorization: Basic …`.
    public struct Credentials: Sendable {
        /// The client's name (OAuth2's client ID, or a user name).
        public var username: String
        /// Its secret.
        public var password: String

        /// Credentials for `Authorization: Basic base64(username:password)`.
        public init(username: String, password: String) {
            self.username = username
            self.password = password
        }
    }

    /// The URLs an authenticator covers.
    public struct Coverage: Sendable {
        private let matches: @Sendable (URL) -> Bool

        /// URLs on `host` (case-insensitively, any port unless one is given) whose path starts
        /// with `pathPrefix`, over `https` only unless `allowsHTTP`.
        public static func host(_ host: String, port: Int? = nil, pathPrefix: String = "/", allowsHTTP: Bool = false) -> Coverage {
            let host = host.lowercased()
            return Coverage { url in
                guard let scheme = url.scheme?.lowercased(), scheme == "https" || (allowsHTTP && scheme == "http"),
                      url.host?.lowercased() == host else { return false }
                if let port, (url.port ?? (scheme == "https" ? 443 : 80)) != port { return false }
                let path = url.path.isEmpty ? "/" : url.path
                return path.hasPrefix(pathPrefix)
            }
        }

        /// URLs whose whole `absoluteString` matches the regular expression `pattern`.
        /// Throws if `pattern` is not a valid regular expression.
        public static func matching(_ pattern: String) throws -> Coverage {
            let regex = SendableRegex(try Regex(pattern))
            return Coverage { url in regex.wholeMatch(url.absoluteString) }
        }

        /// Any URL for which `matches` returns true.
        public init(_ matches: @escaping @Sendable (URL) -> Bool) {
            self.matches = matches
        }

        /// Whether requests to `url` are covered.
        public func covers(_ url: URL) -> Bool { matches(url) }
    }

    /// The most times one request is sent again after a 401 (each time with a newer token).
    public let maxResendsPerRequest: Int

    private let coverage: Coverage
    private let store: (any TokenStore)?
    private let refresher: TokenRefresher

    /// Creates an authenticator.
    ///
    /// - Parameters:
    ///   - coverage: The URLs whose requests it authorizes.
    ///   - tokenRequest: Builds the token request (method, URL, query, body, fields).
    ///   - credentials: Supplies the credentials sent on each token request as
    ///     `Authorization: Basic …`; `nil` sends none.
    ///   - parseToken: Reads the token from a 2xx token response; throwing makes it a failure.
    ///   - onTokenFailure: Decides after a failed token request. The default tries three times
    ///     in all, giving up at once on a 4xx status.
    ///   - tokenStore: Keeps the token between runs.
    ///   - queue: Where token requests run.
    ///   - maxResendsPerRequest: See ``maxResendsPerRequest``.
    ///   - tokenRequestTimeout: The token request's total time limit when `tokenRequest` sets
    ///     none (``Request/Timeouts/total``). Every covered request waits while a token request
    ///     runs, so one that never ends would hold them all for good; it fails with
    ///     ``RequestError/timedOut(_:)`` instead, and `onTokenFailure` decides.
    ///   - giveUpBackoff: How long covered requests fail at once with
    ///     ``TokenUnavailableError`` after the flow gave up, so that a burst of calls against
    ///     a failing token endpoint makes one flow's token requests (see ``GiveUpBackoff``).
    public convenience init(
        covering coverage: Coverage,
        tokenRequest: @escaping @Sendable () -> Request,
        credentials: @escaping @Sendable () async -> Credentials? = { nil },
        parseToken: @escaping @Sendable (Response) throws -> String,
        onTokenFailure: @escaping @Sendable (TokenFailure) async -> TokenFailureDecision = OAuth2Authenticator.defaultFailureDecision,
        tokenStore: (any TokenStore)? = nil,
        queue: RequestQueue = .main,
        maxResendsPerRequest: Int = 2,
        tokenRequestTimeout: Duration = OAuth2Authenticator.defaultTokenRequestTimeout,
        giveUpBackoff: GiveUpBackoff = .standard
    ) {
        self.init(
            covering: coverage, tokenRequest: tokenRequest, credentials: credentials, parseToken: parseToken,
            onTokenFailure: onTokenFailure, tokenStore: tokenStore, queue: queue,
            maxResendsPerRequest: maxResendsPerRequest, tokenRequestTimeout: tokenRequestTimeout,
            giveUpBackoff: giveUpBackoff, now: { .now })
    }

    /// The designated initializer, with the clock backoffs are measured on (tests set it).
    init(
        covering coverage: Coverage,
        tokenRequest: @escaping @Sendable () -> Request,
        credentials: @escaping @Sendable () async -> Credentials?,
        parseToken: @escaping @Sendable (Response) throws -> String,
        onTokenFailure: @escaping @Sendable (TokenFailure) async -> TokenFailureDecision,
        tokenStore: (any TokenStore)?,
        queue: RequestQueue,
        maxResendsPerRequest: Int,
        tokenRequestTimeout: Duration,
        giveUpBackoff: GiveUpBackoff,
        now: @escaping @Sendable () -> ContinuousClock.Instant
    ) {
        self.coverage = coverage
        self.store = tokenStore
        self.maxResendsPerRequest = max(0, maxResendsPerRequest)
        let store = tokenStore
        let backoff = TokenRefresher.StateMachine.Backoff(initial: giveUpBackoff.initial, maximum: giveUpBackoff.maximum)
        refresher = TokenRefresher(token: tokenStore?.loadToken(), backoff: backoff, now: now) { attempt in
            var request = tokenRequest()
            if request.timeouts.total == nil { request.timeouts.total = tokenRequestTimeout }
            if let credentials = await credentials() {
                let pair = Data("\(credentials.username):\(credentials.password)".utf8).base64EncodedString()
                request.headerFields[.authorization] = "Basic \(pair)"
            }
            let failure: TokenFailure
            do {
                let response = try await queue.response(for: request)
                if (200..<300).contains(response.status.code) {
                    do {
                        let token = try parseToken(response)
                        if let store { await TokenStoreCalls.run { store.saveToken(token) } }
                        return .token(token)
                    } catch {
                        failure = TokenFailure(attempt: attempt, response: response, error: error)
                    }
                } else {
                    failure = TokenFailure(attempt: attempt, response: response, error: TokenRequestStatusError(status: response.status))
                }
            } catch {
                failure = TokenFailure(attempt: attempt, response: nil, error: error)
            }
            if Task.isCancelled { return .giveUp(failure.error) }
            switch await onTokenFailure(failure) {
            case .retry: return .retry
            case .giveUp:
                if let store { await TokenStoreCalls.run { store.removeToken() } }
                return .giveUp(failure.error)
            }
        }
    }

    /// The total time limit of a token request that sets none: 30 seconds.
    public static let defaultTokenRequestTimeout: Duration = .seconds(30)

    /// Tries a token request three times in all; gives up at once on a 4xx status (wrong
    /// credentials do not get better by asking again).
    public static let defaultFailureDecision: @Sendable (TokenFailure) async -> TokenFailureDecision = { failure in
        if let status = failure.response?.status.code, (400..<500).contains(status) { return .giveUp }
        return failure.attempt < 3 ? .retry : .giveUp
    }

    /// Whether requests to `url` are authorized by this authenticator.
    public func covers(_ url: URL) -> Bool { coverage.covers(url) }

    /// The token requests go out with now, if any.
    public var currentToken: String? { refresher.currentToken }

    /// Sends `request` through `send` with the flow described on ``OAuth2Authenticator``;
    /// requests it does not cover go straight to `send`.
    ///
    /// Throws ``RequestError/cancelled`` when the calling task is cancelled while the request
    /// is held; `send`'s errors are passed on.
    public func authorize(
        _ request: Request,
        send: (Request) async throws -> Response
    ) async throws -> Response {
        guard covers(request.url) else { return try await send(request) }
        let id = refresher.makeID()
        var release = await refresher.tokenForSending(id)
        var lastUnauthorized: Response?
        var resends = 0
        while true {
            let token: String?
            switch release {
            case .cancelled:
                throw RequestError.cancelled
            case .giveUp:
                guard let lastUnauthorized else { throw RequestError.cancelled }
                return lastUnauthorized
            case .fail(let error, let retryAfter):
                throw TokenUnavailableError(underlying: error.error, retryAfter: retryAfter)
            case .send(let next):
                token = next
            }
            var authorized = request
            if let token { authorized.headerFields[.authorization] = "Bearer \(token)" }
            let response = try await send(authorized)
            guard response.status == .unauthorized, resends < maxResendsPerRequest else { return response }
            resends += 1
            lastUnauthorized = response
            release = await refresher.tokenAfterUnauthorized(id, sentToken: token)
        }
    }
}

/// The token request answered with a status outside 2xx.
public struct TokenRequestStatusError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The token request's status.
    public var status: HTTPResponse.Status
    public var description: String { "the token request failed with HTTP \(status.code) \(status.reasonPhrase)" }
}

/// Thrown by a covered request that was not sent because a token flow gave up less than
/// ``OAuth2Authenticator/GiveUpBackoff`` ago (or gave up while it waited to go out).
public struct TokenUnavailableError: Error, Sendable, CustomStringConvertible {
    /// Why the token flow gave up: the error of its last token request
    /// (``OAuth2Authenticator/TokenFailure/error``).
    public var underlying: any Error
    /// How long from when the request was refused until a request may start a token flow again.
    public var retryAfter: Duration

    public var description: String {
        let seconds = Double(retryAfter.components.seconds) + Double(retryAfter.components.attoseconds) / 1e18
        return "no token: the token request failed (\(underlying)); no new token request for \(String(format: "%.1f", seconds)) s"
    }
}

/// A compiled regular expression shared across threads.
private struct SendableRegex: @unchecked Sendable {  // safe: a Regex is an immutable value; matching reads it only
    let regex: Regex<AnyRegexOutput>

    init(_ regex: Regex<AnyRegexOutput>) { self.regex = regex }

    func wholeMatch(_ text: String) -> Bool { (try? regex.wholeMatch(in: text)) != nil }
}
