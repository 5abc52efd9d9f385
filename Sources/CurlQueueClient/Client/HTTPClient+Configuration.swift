public import CurlQueue
public import Dispatch
public import Foundation
public import HTTPTypes

extension HTTPClient {
    /// Everything an ``HTTPClient`` needs to know, fixed when the client is made.
    public struct Configuration: Sendable {
        /// The URL every path is relative to, e.g. `https://api.example.org/v1`. A path is
        /// appended to its path (a trailing slash makes no difference); its query, if any, is
        /// kept and the call's query items follow it.
        public var baseURL: URL
        /// The URL a request that asks for the CDN (``APIRequest/useCDN``) is relative to
        /// instead. Without one, such requests go to ``baseURL``.
        public var cdnURL: URL?
        /// Header fields sent with every request. A request's own field of the same name
        /// replaces every default of that name; other defaults are kept.
        public var headerFields: HTTPFields
        /// Time limits of every request that does not set its own; `nil` uses
        /// ``HTTPClient/Defaults/timeouts``.
        public var timeouts: Request.Timeouts?
        /// The response cache the client answers from and stores in; `nil` (the default) caches
        /// nothing. It sits below the middleware: its entries are kept apart by the credentials
        /// the request carries after them (a token middleware's or OAuth2's), so clients that
        /// share a cache, or a client whose token changes, never get each other's responses.
        /// See docs/caching.md.
        public var responseCache: ResponseCache?
        /// How requests that do not set their own use the ``responseCache``; `nil` uses
        /// ``HTTPClient/Defaults/cachePolicy``.
        public var cachePolicy: CachePolicy?
        /// How HTTPS servers are trusted by requests that do not set their own: a CA file or
        /// folder, a pinned key. Verification is never off unless this says so, loudly.
        public var tls: Request.TLSOptions
        /// Retry settings of every request that does not set its own.
        public var retry: RetrySettings
        /// The queue the client's transfers run on; by default ``HTTPClient/defaultQueue``,
        /// which allows duplicate requests, so every call runs.
        ///
        /// Whatever the queue, the client's calls of an equal GET or HEAD in flight at once share
        /// one transfer and each gets its response (see ``HTTPClient``), so they never cancel
        /// each other. Other requests reach the queue one per call, and the queue's duplicate
        /// rule applies to them: on a queue whose ``RequestQueue/allowDuplicateRequests`` is
        /// false (as on ``RequestQueue/main``) a second identical POST, PUT, PATCH, DELETE or
        /// download cancels the first still there, which then fails with
        /// `.transport(.cancelled)` — as does any request equal to a shared GET that is added
        /// to that queue by other code. Give such a queue only to a client whose identical
        /// calls should replace each other.
        public var queue: RequestQueue
        /// The middleware stack, outermost first: a request passes through it in this order,
        /// its response in the reverse order.
        public var middleware: [any HTTPClientMiddleware]
        /// Where completion closures and delegate methods run: by default
        /// ``HTTPClient/defaultCallbackQueue``, which is serial. On a serial queue a call's
        /// start callback always runs before its outcome callback.
        public var callbackQueue: DispatchQueue
        /// Encodes ``HTTPClient/Body/json(_:)`` bodies.
        public var jsonEncoder: JSONEncoder
        /// Decodes typed results.
        public var jsonDecoder: JSONDecoder

        /// Creates a configuration; everything but the base URL has a default.
        public init(
            baseURL: URL,
            cdnURL: URL? = nil,
            headerFields: HTTPFields = [:],
            timeouts: Request.Timeouts? = nil,
            responseCache: ResponseCache? = nil,
            cachePolicy: CachePolicy? = nil,
            tls: Request.TLSOptions = Request.TLSOptions(),
            retry: RetrySettings = RetrySettings(),
            queue: RequestQueue = HTTPClient.defaultQueue,
            middleware: [any HTTPClientMiddleware] = [],
            callbackQueue: DispatchQueue = HTTPClient.defaultCallbackQueue,
            jsonEncoder: JSONEncoder = JSONEncoder(),
            jsonDecoder: JSONDecoder = JSONDecoder()
        ) {
            self.baseURL = baseURL
            self.cdnURL = cdnURL
            self.headerFields = headerFields
            self.timeouts = timeouts
            self.responseCache = responseCache
            self.cachePolicy = cachePolicy
            self.tls = tls
            self.retry = retry
            self.queue = queue
            self.middleware = middleware
            self.callbackQueue = callbackQueue
            self.jsonEncoder = jsonEncoder
            self.jsonDecoder = jsonDecoder
        }
    }
}

/// Whether and how a client's transfers retry failed attempts: the settings of
/// ``RequestOperation/autoRetry``, ``RequestOperation/retryPolicy`` and
/// ``RequestOperation/autoRetryErrorCodes``, applied to each operation the client makes.
public struct RetrySettings: Hashable, Sendable {
    /// Whether failed attempts are retried at all. Defaults to false.
    public var autoRetry: Bool
    /// How many attempts, how far apart, and which statuses count as failures.
    public var policy: RetryPolicy
    /// The libcurl codes retried; by default ``CurlCode/connectivityErrors``.
    public var errorCodes: Set<CurlCode>

    /// Creates retry settings.
    public init(autoRetry: Bool = false, policy: RetryPolicy = RetryPolicy(), errorCodes: Set<CurlCode> = CurlCode.connectivityErrors) {
        self.autoRetry = autoRetry
        self.policy = policy
        self.errorCodes = errorCodes
    }

    /// No retries.
    public static let none = RetrySettings()
}
