import CurlQueue

/// How a request uses the response cache: NitroConnection's policies.
///
/// A policy only matters where a cache is set up (an `HTTPClient` with a response cache
/// store); without one, every request loads from the network.
public enum CachePolicy: Hashable, Sendable {
    /// HTTP's own rules (RFC 9111): a fresh stored response is returned with no network
    /// traffic; a stale one that has a validator (`ETag`, `Last-Modified`) is revalidated with
    /// a conditional request, and a `304 Not Modified` returns the stored body; anything else
    /// loads. `Cache-Control: no-store` keeps a response out of the cache, `no-cache` forces
    /// revalidation. A request's cache TTL, where given, replaces the response's own freshness.
    case useProtocolCachePolicy
    /// Always load from the network, but store the response where HTTP's rules allow it.
    case reloadIgnoringCache
    /// Return a stored response, fresh or stale, without asking the network; load only when
    /// nothing is stored.
    case returnCacheElseLoad
    /// Return a stored response, fresh or stale; never load. With nothing stored the request
    /// fails without network traffic.
    case returnCacheDontLoad
}
