import Foundation

/// How a failed attempt is retried: how many attempts, how long to wait between them, and
/// which HTTP statuses count as failures worth retrying.
///
/// Retries happen only when the operation's ``RequestOperation/autoRetry`` is on. The wait
/// before retry *n* is `initialBackoff × multiplier^(n-1)`, capped at `maxBackoff`, with "equal
/// jitter": a random point in the upper `jitter` fraction of it, so that many clients failing
/// together do not come back together. A `Retry-After` from the server replaces the backoff
/// when it asks for longer; it is the earliest time to come back, and a random part of up to
/// `jitter` of it (at most `maxBackoff`) is added, so that the many clients a server gave the
/// same time do not all come back at that moment.
public struct RetryPolicy: Hashable, Sendable {
    /// Attempts in all, the first included. At least 1.
    public var maxAttempts: Int
    /// The wait before the first retry.
    public var initialBackoff: Duration
    /// The longest wait computed from the backoff.
    public var maxBackoff: Duration
    /// How much each wait grows over the previous one.
    public var multiplier: Double
    /// The fraction (0...1) of each wait that is random; also how much of a `Retry-After` may
    /// be added to it at random.
    public var jitter: Double
    /// HTTP statuses retried like network errors, such as 408, 429, 500, 502, 503, 504.
    /// Empty by default: a status is a ``Response``, not an error.
    public var retryableStatuses: Set<Int>
    /// The longest `Retry-After` honoured. A server asking for longer gets no retry: its
    /// response is returned as it is.
    public var maxRetryAfter: Duration

    /// Creates a policy. The defaults: 5 attempts, 250 ms growing ×2 up to 30 s, half of
    /// each wait random, no status retried, `Retry-After` honoured up to 5 minutes.
    public init(
        maxAttempts: Int = 5,
        initialBackoff: Duration = .milliseconds(250),
        maxBackoff: Duration = .seconds(30),
        multiplier: Double = 2,
        jitter: Double = 0.5,
        retryableStatuses: Set<Int> = [],
        maxRetryAfter: Duration = .seconds(300)
    ) {
        self.maxAttempts = maxAttempts
        self.initialBackoff = initialBackoff
        self.maxBackoff = maxBackoff
        self.multiplier = multiplier
        self.jitter = jitter
        self.retryableStatuses = retryableStatuses
        self.maxRetryAfter = maxRetryAfter
    }

    /// The statuses that commonly mean "try again later": 408, 429, 500, 502, 503, 504.
    public static let transientStatuses: Set<Int> = [408, 429, 500, 502, 503, 504]

    /// The backoff before the retry that follows attempt `attempt` (1-based), with `random`
    /// in 0..<1 choosing the point within the jitter.
    package func backoff(afterAttempt attempt: Int, random: Double) -> Duration {
        let base = initialBackoff.seconds * pow(max(1, multiplier), Double(max(0, attempt - 1)))
        let capped = min(base, maxBackoff.seconds)
        let spread = min(1, max(0, jitter))
        let seconds = capped * (1 - spread) + capped * spread * min(max(random, 0), 1)
        return .wait(seconds: seconds)
    }

    /// The wait for a `Retry-After` of `asked`: `asked` plus up to `jitter × asked` (at most
    /// `maxBackoff`), with `random` in 0..<1 choosing the point.
    func spread(retryAfter asked: Duration, random: Double) -> Duration {
        let extra = min(asked.seconds * min(1, max(0, jitter)), maxBackoff.seconds) * min(max(random, 0), 1)
        return asked + .wait(seconds: extra)
    }
}

extension Duration {
    /// The duration as a (possibly fractional) number of seconds.
    package var seconds: Double {
        let (s, attoseconds) = components
        return Double(s) + Double(attoseconds) / 1e18
    }

    /// A computed wait of `seconds`: NaN and negative values are no wait, and anything past
    /// what 64-bit nanoseconds hold (about 292 years) is that much, so that no policy, however
    /// extreme, makes a wait that cannot be represented.
    package static func wait(seconds: Double) -> Duration {
        guard seconds > 0 else { return .zero }
        return .nanoseconds(seconds < 9.2e9 ? Int64(seconds * 1e9) : Int64.max)
    }

    /// Whole milliseconds, rounded up, clamped to what libcurl's `long` options take.
    var clampedMilliseconds: Int {
        let ms = (seconds * 1000).rounded(.up)
        return ms >= Double(Int32.max) ? Int(Int32.max) : max(0, Int(ms))
    }
}
