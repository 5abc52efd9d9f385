public import Foundation
import HTTPTypes

/// A private HTTP cache in front of any way of sending requests: it answers from its
/// ``ResponseCacheStore`` where the ``CachePolicy`` allows, revalidates stale responses, and
/// stores what HTTP's rules let it keep.
///
/// - A response answered from the store has `attempts == 0`: no request was sent. A
///   revalidated one (`304 Not Modified`) has the stored status, fields updated by the 304,
///   the stored body, and the attempts of the conditional request.
/// - Only `GET` responses with their body in memory are cached (not downloads to a file, not
///   discarded bodies); `HEAD` and others go straight through. A successful `POST`, `PUT`,
///   `PATCH` or `DELETE` removes the stored response for its URL (RFC 9111 §4.4).
/// - Safe to use from any task; the store is asked from the calling task.
public final class ResponseCache: Sendable {
    /// Where the entries live.
    public let store: any ResponseCacheStore
    private let now: @Sendable () -> Date

    /// A cache over `store`. `now` is the clock freshness is judged by.
    public init(store: any ResponseCacheStore, now: @escaping @Sendable () -> Date = { Date() }) {
        self.store = store
        self.now = now
    }

    /// Answers `request` from the cache or through `send`, as `policy` says.
    ///
    /// - Parameters:
    ///   - timeToLive: Replaces the response's own freshness when storing it (YTKNetwork's
    ///     per-request cache time), counted from the response's arrival whatever its `Age`
    ///     or `Date`. `Cache-Control: no-store` still keeps a response out.
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
            invalidateAfterUnsafeMethod(request, response: response)
            return response
        }
        let key = CacheRules.key(method: .get, url: request.url)
        let entry = store.cachedResponse(forKey: key).flatMap {
            CacheRules.matches($0, requestFields: request.headerFields) ? $0 : nil
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
            if CacheRules.isFresh(entry, requestFields: request.headerFields, now: now()) {
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
                return keep(response, for: request, key: key, requestedAt: requestedAt, timeToLive: timeToLive)
            }
            var updated = CacheRules.revalidated(entry, notModifiedFields: response.headerFields,
                                                 requestedAt: requestedAt, receivedAt: now())
            if let timeToLive { updated.timeToLive = timeToLive }
            store.store(updated, forKey: key)
            var answer = cachedAnswer(updated, for: request)
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
        return keep(response, for: request, key: key, requestedAt: requestedAt, timeToLive: timeToLive)
    }

    /// Stores `response` if HTTP's rules allow it; a response that may not be stored replaces
    /// nothing, but removes the old entry (it is no longer what the server says).
    private func keep(_ response: Response, for request: Request, key: String, requestedAt: Date, timeToLive: Duration?) -> Response {
        // A response that came after a redirect is the answer for another URL: a 302 is not
        // cacheable, and a 301's target may change what it says. It is not kept under this one.
        let storable = response.fileURL == nil && response.metrics.redirectCount == 0 && CacheRules.isStorable(
            method: request.method, requestFields: request.headerFields, status: response.status.code,
            responseFields: response.headerFields, timeToLive: timeToLive)
        if storable, let vary = CacheRules.varyingFields(responseFields: response.headerFields, requestFields: request.headerFields) {
            store.store(CachedResponse(status: response.status, headerFields: response.headerFields, body: response.body,
                                       requestedAt: requestedAt, receivedAt: now(), varyingRequestFields: vary,
                                       timeToLive: timeToLive), forKey: key)
        } else if response.status.kind == .successful || CacheControl(response.headerFields).noStore {
            store.removeCachedResponse(forKey: key)
        }
        return response
    }

    private func invalidateAfterUnsafeMethod(_ request: Request, response: Response) {
        let unsafe: Set<HTTPRequest.Method> = [.post, .put, .patch, .delete]
        guard unsafe.contains(request.method), (200..<400).contains(response.status.code) else { return }
        store.removeCachedResponse(forKey: CacheRules.key(method: .get, url: request.url))
    }

    /// The stored response as an answer to `request`, with its current `Age`.
    private func cachedAnswer(_ entry: CachedResponse, for request: Request) -> Response {
        var fields = entry.headerFields
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
