public import CurlQueue

extension HTTPClient {
    /// The process-wide defaults: the least specific of the three levels of time limits and
    /// cache policy. A request's own value wins over its client's
    /// (``Configuration/timeouts``, ``Configuration/cachePolicy``), which wins over these.
    public struct Defaults: Hashable, Sendable {
        /// Time limits of requests whose call and client set none.
        public var timeouts: Request.Timeouts
        /// Cache policy of requests whose call and client set none. It matters only for
        /// clients with a ``Configuration/responseCache``.
        public var cachePolicy: CachePolicy

        /// The defaults CurlQueue starts with: ``Request/Timeouts/init(connect:total:idle:head:)``'s
        /// and HTTP's own cache rules.
        public init(timeouts: Request.Timeouts = Request.Timeouts(), cachePolicy: CachePolicy = .useProtocolCachePolicy) {
            self.timeouts = timeouts
            self.cachePolicy = cachePolicy
        }
    }

    private static let storedDefaults = Locked(Defaults())

    /// The process-wide defaults. Changing them affects calls made afterwards, by every
    /// client; safe from any thread.
    public static var defaults: Defaults {
        get { storedDefaults.withLock { $0 } }
        set { storedDefaults.withLock { $0 = newValue } }
    }
}
