import Synchronization

/// A receive-speed limit for a group of transfers together (aria2's `--max-overall-rate`):
/// every request whose ``Request/sharedReceiveLimit`` is this object (the same instance;
/// equality is identity), on any queue.
///
/// The transfers of the group draw on one budget of `bytesPerSecond`: a transfer that takes
/// body bytes uses the group's time for them, and a transfer whose bytes come ahead of the
/// group's rate is paused until their time, whichever transfer it is. A transfer that cannot
/// go fast (a slow server) thus leaves its share to the others. Each transfer's own
/// ``Request/maxReceiveSpeed`` holds as well.
public final class SharedRateLimit: Hashable, Sendable {
    /// The most bytes per second the group receives together, 1 or more.
    public let bytesPerSecond: Int64
    /// When the group may next take bytes (monotonic nanoseconds); see `PaceClock`.
    private let ready = Mutex<UInt64>(0)

    /// Creates a limit of `bytesPerSecond` (values below 1 mean 1) for the requests that share it.
    public init(bytesPerSecond: Int64) {
        self.bytesPerSecond = Swift.max(1, bytesPerSecond)
    }

    /// The same instance.
    public static func == (lhs: SharedRateLimit, rhs: SharedRateLimit) -> Bool { lhs === rhs }

    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    /// Takes `count` bytes from the budget at `now` and returns nil, or returns when the group
    /// may take them (taking nothing).
    func take(_ count: Int, now: UInt64) -> UInt64? {
        ready.withLock { ready in
            if ready > now { return ready }
            ready = PaceClock.advance(ready, by: count, rate: bytesPerSecond, now: now)
            return nil
        }
    }
}
