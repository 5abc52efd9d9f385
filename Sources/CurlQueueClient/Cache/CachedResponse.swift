import CurlQueue
public import Foundation
public import HTTPTypes

/// A response as a cache keeps it: the status, header fields and body, with the times HTTP's
/// freshness rules need.
public struct CachedResponse: Hashable, Sendable {
    /// The response's status.
    public var status: HTTPResponse.Status
    /// The response's header fields, updated by each `304 Not Modified` that revalidated it.
    public var headerFields: HTTPFields
    /// The whole body.
    public var body: Data
    /// When the request that got this response was sent (RFC 9111's `request_time`).
    public var requestedAt: Date
    /// When the response arrived (RFC 9111's `response_time`).
    public var receivedAt: Date
    /// The request's values of the fields that the response's `Vary` names, by lowercased
    /// field name (a field the request did not send is absent). A later request matches this
    /// response only if it sends the same values.
    public var varyingRequestFields: [String: String]
    /// A freshness lifetime that replaces the one the response's header fields give (a
    /// request's cache TTL, YTKNetwork's `cacheTimeInSeconds`).
    public var timeToLive: Duration?

    /// Creates a stored response.
    public init(
        status: HTTPResponse.Status,
        headerFields: HTTPFields,
        body: Data,
        requestedAt: Date,
        receivedAt: Date,
        varyingRequestFields: [String: String] = [:],
        timeToLive: Duration? = nil
    ) {
        self.status = status
        self.headerFields = headerFields
        self.body = body
        self.requestedAt = requestedAt
        self.receivedAt = receivedAt
        self.varyingRequestFields = varyingRequestFields
        self.timeToLive = timeToLive
    }

    /// Roughly the memory this entry holds: the body plus its header fields.
    var byteCost: Int {
        var cost = body.count + 128
        for field in headerFields { cost += field.name.rawName.utf8.count + field.value.utf8.count + 32 }
        for (name, value) in varyingRequestFields { cost += name.utf8.count + value.utf8.count + 32 }
        return cost
    }
}

/// Where a response cache keeps its entries, by key. CurlQueue has two:
/// ``MemoryCacheStore`` and ``DiskCacheStore``.
///
/// A store only keeps and returns entries; the decisions of what to store and when an entry
/// may be used are the cache's. Implementations must be safe to call from any thread, and
/// fast enough to call from a Swift task (no waiting on the network). An entry a store cannot
/// read back intact must come back as `nil` (a miss), never as a damaged response.
public protocol ResponseCacheStore: Sendable {
    /// The entry stored under `key`, or `nil`.
    func cachedResponse(forKey key: String) -> CachedResponse?
    /// Stores `response` under `key`, replacing what was there.
    func store(_ response: CachedResponse, forKey key: String)
    /// Removes the entry under `key`, if any.
    func removeCachedResponse(forKey key: String)
    /// Removes every entry.
    func removeAll()
    /// A random secret of this store's (at least 16 bytes) that a ``ResponseCache`` hashes a
    /// request's credentials with (HMAC-SHA-256) to make the keys of its entries: keys hold
    /// that hash, never a credential, and an entry is found again only with the same secret.
    ///
    /// The default is random per process, so a store that persists its entries finds the
    /// ones stored for credentials again only within one run (entries of requests without
    /// credentials do not depend on it); ``DiskCacheStore`` keeps its own in its folder.
    var partitionSecret: [UInt8] { get }
    /// Whether calls wait for a disk or another slow resource: a ``ResponseCache`` then makes
    /// them on Dispatch threads, off the Swift concurrency pool. False by default (a store in
    /// memory); ``DiskCacheStore`` says true.
    var blocksOnIO: Bool { get }
}

extension ResponseCacheStore {
    /// False: calls are quick (``ResponseCacheStore/blocksOnIO``).
    public var blocksOnIO: Bool { false }

    /// Random, one per process (``ResponseCacheStore/partitionSecret``).
    public var partitionSecret: [UInt8] { CachePartition.processSecret }
}
