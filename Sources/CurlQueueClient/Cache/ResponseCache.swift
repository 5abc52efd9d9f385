public import CurlQueue
public import Foundation
public import HTTPTypes

/// An HTTP cache in front of any way of sending requests: it answers from its
/// ``ResponseCacheStore`` where the ``CachePolicy`` allows, revalidates stale responses, and
/// stores what HTTP's rules (RFC 9111) let it keep.
///
/// - **One user's entries are never another's.** Every entry is stored under the method, the
///   URL and a keyed hash (HMAC-SHA-256 with the store's ``ResponseCacheStore/partitionSecret``)
///   of the credentials the request carries when it reaches the cache (in an ``HTTPClient``,
///   after the middleware: the token of a ``TokenAuthMiddleware`` or an
///   ``OAuth2Authenticator`` included): `Authorization`, `Proxy-Authorization`, `Cookie`, a
///   user and password in the URL, and the fields named in `credentialFields`. A request with
///   other credentials, or none, finds nothing stored and is sent; a token that changes finds
///   nothing stored. No credential is kept in a key or an entry in clear.
/// - **What is stored** depends on the ``CacheScope``: a ``CacheScope/shared`` cache refuses
///   `private` responses and responses to requests with `Authorization` unless they say
///   `public`, `s-maxage` or `must-revalidate`. Neither stores a response with `no-store` (in
///   the request or the response), `Vary: *` or `Set-Cookie`. `Vary` is honoured: a stored
///   response answers only requests with the same values of the fields it names.
/// - A response answered from the store has `attempts == 0`: no request was sent. A
///   revalidated one (`304 Not Modified`) has the stored status, fields updated by the 304,
///   the stored body, and the attempts of the conditional request.
/// - Only `GET` responses with their body in memory are cached (not downloads to a file, not
///   discarded bodies); `HEAD` and others go straight through. A successful `POST`, `PUT`,
///   `PATCH` or `DELETE` removes the stored response for its URL, the caller's and the one for
///   requests without credentials (RFC 9111 §4.4).
/// - Safe to use from any task. A store that waits for a disk (``ResponseCacheStore/blocksOnIO``,
///   ``DiskCacheStore``) is called on Dispatch threads, never on the Swift concurrency pool;
///   each call is awaited, so a later lookup sees what was written.
public final class ResponseCache: Sendable {
    /// Where the entries live.
    public let store: any ResponseCacheStore
    /// Whose responses the cache holds, which decides what it may store.
    public let scope: CacheScope
    private let partition: CachePartition
    private let now: @Sendable () -> Date
    private let calls: StoreCalls

    /// A cache over `store`.
    ///
    /// - Parameters:
    ///   - scope: ``CacheScope/private`` (the default) for one user's cache,
    ///     ``CacheScope/shared`` for a store that serves several users. Either way, entries are
    ///     kept apart by the credentials of their requests.
    ///   - credentialFields: Fields that carry credentials besides `Authorization`,
    ///     `Proxy-Authorization` and `Cookie` (an `X-API-Key`): their values select the entries
    ///     too, and are never kept in clear (not even when a response's `Vary` names them).
    ///   - now: The clock freshness is judged by.
    public init(
        store: any ResponseCacheStore,
        scope: CacheScope = .private,
        credentialFields: [HTTPField.Name] = [],
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.store = store
        self.scope = scope
        calls = StoreCalls(store)
        partition = CachePartition(declaredFields: credentialFields, secret: store.partitionSecret)
        self.now = now
    }

    /// Answers `request` from the cache or through `send`, as `policy` says.
    ///
    /// - Parameters:
    ///   - timeToLive: Replaces the response's own freshness when storing it (YTKNetwork's
    ///     per-request cache time), counted from the response's arrival whatever its `Age`
    ///     or `Date`. It lifts no other rule: `no-store`, `Set-Cookie`, `Vary: *` and, in a
    ///     shared cache, `private` and `Authorization` still keep a response out, and the
    ///     entry is still only for the request's credentials.
    /// - Throws: ``ResponseCacheMiss`` for ``CachePolicy/returnCacheDontLoad`` with nothing
    ///   stored; `send`'s errors otherwise.
    public func response(
        for request: Request,
        policy: CachePolicy = .useProtocolCachePolicy,
        timeToLive: Duration? = nil,
        send: (Request) async throws -> Response
    ) async throws -> Response {
        // A GET with a body (a search API's query) is not told apart by its URL: not cached.
        guard request.method == .get, request.body == nil, request.destination == nil, !request.discardsBody else {
            let response = try await send(request)
            await invalidateAfterUnsafeMethod(request, response: response)
            return response
        }
        let key = storageKey(for: request)
        let entry = await calls.cachedResponse(forKey: key).flatMap {
            CacheRules.matches($0, requestFields: request.headerFields, partitioned: partition.credentialFields) ? $0 : nil
        }

        switch policy {
        case .returnCacheDontLoad:
            guard let entry else { throw ResponseCacheMiss(url: request.url) }
            return cachedAnswer(entry, for: request)
        case .returnCacheElseLoad:
            if let entry { return cachedAnswer(entry, for: request) }
            return try await load(request, key: key, timeToLive: timeToLive, send: send)
        case .reloadIgnoringCache:
            return try await load(request, key: key, timeToLive: timeToLive, send: send)
        case .useProtocolCachePolicy:
            guard let entry else { return try await load(request, key: key, timeToLive: timeToLive, send: send) }
            if CacheRules.isFresh(entry, requestFields: request.headerFields, now: now(), scope: scope) {
                return cachedAnswer(entry, for: request)
            }
            let conditional = CacheRules.conditionalFields(for: entry)
            let ownConditions = request.headerFields[.ifNoneMatch] != nil || request.headerFields[.ifModifiedSince] != nil
            guard !conditional.isEmpty, !ownConditions else {
                return try await load(request, key: key, timeToLive: timeToLive, send: send)
            }
            var revalidation = request
            for field in conditional { revalidation.headerFields[field.name] = field.value }
            let requestedAt = now()
            let response = try await send(revalidation)
            guard response.status == .notModified else {
                return await keep(response, for: request, key: key, requestedAt: requestedAt, timeToLive: timeToLive)
            }
            var updated = CacheRules.revalidated(entry, notModifiedFields: response.headerFields,
                                                 requestedAt: requestedAt, receivedAt: now())
            if let timeToLive { updated.timeToLive = timeToLive }
            // The 304's fields may have made it one that may not be stored (`no-store`, or
            // `private` in a shared cache).
            if CacheRules.isStorable(
                method: .get, requestFields: request.headerFields, status: updated.status.code,
                responseFields: updated.headerFields, timeToLive: updated.timeToLive, scope: scope,
                requestHasAuthorization: CachePartition.hasAuthorization(url: request.url, fields: request.headerFields)) {
                let entry = updated
                await calls.write { $0.store(entry, forKey: key) }
            } else {
                await calls.write { $0.removeCachedResponse(forKey: key) }
            }
            var answer = cachedAnswer(updated, for: request)
            // A cookie the 304 sets is this caller's, now; it is not stored.
            answer.headerFields.append(contentsOf: response.headerFields.filter { $0.name == .setCookie })
            answer.attempts = response.attempts
            answer.metrics = response.metrics
            answer.httpVersion = response.httpVersion
            return answer
        }
    }

    private func load(
        _ request: Request, key: String, timeToLive: Duration?, send: (Request) async throws -> Response
    ) async throws -> Response {
        let requestedAt = now()
        let response = try await send(request)
        return await keep(response, for: request, key: key, requestedAt: requestedAt, timeToLive: timeToLive)
    }

    /// Stores `response` if HTTP's rules allow it; a response that may not be stored replaces
    /// nothing, but removes the old entry (it is no longer what the server says).
    private func keep(_ response: Response, for request: Request, key: String, requestedAt: Date, timeToLive: Duration?) async -> Response {
        // A response that came after a redirect is the answer for another URL: a 302 is not
        // cacheable, and a 301's target may change what it says. It is not kept under this one.
        let storable = response.fileURL == nil && response.metrics.redirectCount == 0 && CacheRules.isStorable(
            method: request.method, requestFields: request.headerFields, status: response.status.code,
            responseFields: response.headerFields, timeToLive: timeToLive, scope: scope,
            requestHasAuthorization: CachePartition.hasAuthorization(url: request.url, fields: request.headerFields))
        if storable, let vary = CacheRules.varyingFields(responseFields: response.headerFields, requestFields: request.headerFields,
                                                         partitioned: partition.credentialFields) {
            let entry = CachedResponse(status: response.status, headerFields: response.headerFields, body: response.body,
                                       requestedAt: requestedAt, receivedAt: now(), varyingRequestFields: vary,
                                       timeToLive: timeToLive)
            await calls.write { $0.store(entry, forKey: key) }
        } else if response.status.kind == .successful || CacheControl(response.headerFields).noStore {
            await calls.write { $0.removeCachedResponse(forKey: key) }
        }
        return response
    }

    private func invalidateAfterUnsafeMethod(_ request: Request, response: Response) async {
        let unsafe: Set<HTTPRequest.Method> = [.post, .put, .patch, .delete]
        guard unsafe.contains(request.method), (200..<400).contains(response.status.code) else { return }
        // Other users' entries cannot be found from here (their keys hold their credentials'
        // hash): the caller's goes, and the one for requests without credentials.
        let keys = [storageKey(for: request), CacheRules.key(method: .get, url: request.url)]
        await calls.write { store in for key in keys { store.removeCachedResponse(forKey: key) } }
    }

    /// The key of the `GET` entry for `request`'s URL and credentials.
    private func storageKey(for request: Request) -> String {
        CacheRules.key(method: .get, url: request.url, partition: partition.tag(url: request.url, fields: request.headerFields))
    }

    /// The stored response as an answer to `request`, with its current `Age`.
    private func cachedAnswer(_ entry: CachedResponse, for request: Request) -> Response {
        var fields = entry.headerFields
        // Never replayed, whatever a store holds.
        fields[values: .setCookie] = []
        let age = CacheRules.currentAge(entry, now: now())
        fields[.age] = String(age.isFinite ? Int(min(max(0, age), TimeInterval(1 << 31)).rounded(.down)) : 1 << 31)
        return Response(status: entry.status, headerFields: fields, body: entry.body, fileURL: nil,
                        effectiveURL: request.url, httpVersion: .http1_1, metrics: TransferMetrics(), attempts: 0)
    }
}

/// ``CachePolicy/returnCacheDontLoad`` found nothing stored for the URL; nothing was sent.
public struct ResponseCacheMiss: Error, Hashable, Sendable, CustomStringConvertible {
    /// The URL asked for.
    public var url: URL
    public var description: String { "no cached response for \(LoggingMiddleware.redacted(url)), and the cache policy forbids loading" }
}
