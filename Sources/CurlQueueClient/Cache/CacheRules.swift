import CurlQueue
import Foundation
import HTTPTypes

/// HTTP's caching rules for a private or a shared cache (RFC 9111), as pure functions of the
/// messages and a clock, so that every rule is tested without a network or a wait.
///
/// Deliberately conservative: no heuristic freshness (a response with no `max-age`,
/// `Expires` or TTL is revalidated or loaded, never guessed fresh), only `GET` is cached, and a
/// response that sets a cookie is not stored.
enum CacheRules {
    /// The statuses a cache may keep (RFC 9110 §15.1's heuristically cacheable ones, less 206).
    static let cacheableStatuses: Set<Int> = [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501]

    /// The key a response is stored under: the method and the URL without its fragment, user
    /// and password, and, for a request that carries credentials, their keyed hash
    /// (``CachePartition/tag(url:fields:)``): one user's entries are never another's.
    static func key(method: HTTPRequest.Method, url: URL, partition: String? = nil) -> String {
        let base = "\(method.rawValue) \(CachePartition.keyURL(url))"
        guard let partition else { return base }
        return base + " credentials=" + partition
    }

    /// Whether a response to this request may be stored.
    ///
    /// Never: `no-store` in the request or the response (a TTL or not), `Vary: *`, a
    /// `Set-Cookie` in the response. In a shared cache, never `private`, and a response to a
    /// request with `Authorization` only if it says `public`, `s-maxage` or `must-revalidate`
    /// (RFC 9111 §3.5), a TTL or not.
    static func isStorable(
        method: HTTPRequest.Method,
        requestFields: HTTPFields,
        status: Int,
        responseFields: HTTPFields,
        timeToLive: Duration?,
        scope: CacheScope = .private,
        requestHasAuthorization: Bool? = nil
    ) -> Bool {
        guard method == .get, cacheableStatuses.contains(status) else { return false }
        let response = CacheControl(responseFields)
        guard !response.noStore, !CacheControl(requestFields).noStore else { return false }
        guard varyingFields(responseFields: responseFields, requestFields: requestFields) != nil else { return false }
        // A response that sets a cookie starts or changes a session, and its body may belong
        // to that session (a CSRF token, a greeting), which the request's credentials do not
        // name: it is not stored, rather than stored without the cookie it goes with.
        guard responseFields[.setCookie] == nil else { return false }
        if scope == .shared {
            guard !response.isPrivate else { return false }
            let authorized = requestHasAuthorization ?? (requestFields[.authorization] != nil)
            if authorized, !response.isPublic, response.sharedMaxAge == nil, !response.mustRevalidate { return false }
        }
        // Worth keeping only if it can be fresh or can be revalidated.
        return timeToLive != nil || response.maxAge != nil || responseFields[.expires] != nil
            || (scope == .shared && response.sharedMaxAge != nil)
            || responseFields[.eTag] != nil || responseFields[.lastModified] != nil
    }

    /// The request's values of the fields the response's `Vary` names, or `nil` for
    /// `Vary: *` (which matches no later request). Fields in `partitioned` (the credential
    /// fields, which the entry's key already holds as a keyed hash) are left out, so that no
    /// credential is kept in clear.
    static func varyingFields(
        responseFields: HTTPFields, requestFields: HTTPFields, partitioned: [HTTPField.Name] = []
    ) -> [String: String]? {
        var result: [String: String] = [:]
        for line in responseFields[values: .vary] {
            for item in line.split(separator: ",") {
                let name = item.trimmingSpaces.lowercased()
                if name == "*" { return nil }
                guard !name.isEmpty, let fieldName = HTTPField.Name(name), !partitioned.contains(fieldName) else { continue }
                let values = requestFields[values: fieldName]
                if !values.isEmpty { result[name] = values.joined(separator: ", ") }
            }
        }
        return result
    }

    /// Whether a stored response may answer a request with these fields (its `Vary` matches).
    static func matches(_ entry: CachedResponse, requestFields: HTTPFields, partitioned: [HTTPField.Name] = []) -> Bool {
        guard let now = varyingFields(responseFields: entry.headerFields, requestFields: requestFields, partitioned: partitioned)
        else { return false }
        // Every field the response varies on must have the value it had; a field that was
        // absent then must be absent now.
        let names = Set(now.keys).union(entry.varyingRequestFields.keys)
        return names.allSatisfy { now[$0] == entry.varyingRequestFields[$0] }
    }

    /// How long the response is fresh for, from its TTL, `s-maxage` (in a shared cache),
    /// `max-age` or `Expires`; `nil` if none says (RFC 9111 §4.2.1).
    static func freshnessLifetime(_ entry: CachedResponse, scope: CacheScope = .private) -> TimeInterval? {
        if let ttl = entry.timeToLive { return TimeInterval(ttl.components.seconds) + TimeInterval(ttl.components.attoseconds) / 1e18 }
        let control = CacheControl(entry.headerFields)
        if scope == .shared, let sharedMaxAge = control.sharedMaxAge { return TimeInterval(sharedMaxAge) }
        if let maxAge = control.maxAge { return TimeInterval(maxAge) }
        if let expiresText = entry.headerFields[.expires] {
            // An invalid Expires (such as "0") means already expired.
            guard let expires = HTTPDate.parse(expiresText) else { return 0 }
            let date = entry.headerFields[.date].flatMap(HTTPDate.parse) ?? entry.receivedAt
            return expires.timeIntervalSince(date)
        }
        return nil
    }

    /// The response's age now (RFC 9111 §4.2.3).
    static func currentAge(_ entry: CachedResponse, now: Date) -> TimeInterval {
        let date = entry.headerFields[.date].flatMap(HTTPDate.parse) ?? entry.receivedAt
        let apparentAge = max(0, entry.receivedAt.timeIntervalSince(date))
        // Delta-seconds, as Cache-Control's: not a Double (`1e400`, `inf`), capped at 2^31.
        let ageValue = TimeInterval(CacheControl.seconds(entry.headerFields[.age].map { Substring($0.trimmingCharacters(in: .whitespaces)) }))
        let responseDelay = max(0, entry.receivedAt.timeIntervalSince(entry.requestedAt))
        let correctedInitialAge = max(apparentAge, max(0, ageValue) + responseDelay)
        let residentTime = max(0, now.timeIntervalSince(entry.receivedAt))
        return correctedInitialAge + residentTime
    }

    /// Whether a stored response may be used without asking the server.
    static func isFresh(_ entry: CachedResponse, requestFields: HTTPFields, now: Date, scope: CacheScope = .private) -> Bool {
        let request = CacheControl(requestFields)
        if request.noCache { return false }
        if entry.timeToLive == nil, CacheControl(entry.headerFields).noCache { return false }
        guard let lifetime = freshnessLifetime(entry, scope: scope) else { return false }
        // A TTL is the caller's, not the server's: it counts from when the response arrived,
        // whatever its `Age` or the server's clock say (a CDN's copy can be older than the TTL).
        let age = entry.timeToLive == nil ? currentAge(entry, now: now) : max(0, now.timeIntervalSince(entry.receivedAt))
        if let maxAge = request.maxAge, age > TimeInterval(maxAge) { return false }
        if let minFresh = request.minFresh, lifetime - age < TimeInterval(minFresh) { return false }
        return age < lifetime
    }

    /// The fields that make a request conditional on the stored response (RFC 9110 §13),
    /// or empty if it has no validator.
    static func conditionalFields(for entry: CachedResponse) -> HTTPFields {
        var fields = HTTPFields()
        if let eTag = entry.headerFields[.eTag] { fields[.ifNoneMatch] = eTag }
        if let lastModified = entry.headerFields[.lastModified] { fields[.ifModifiedSince] = lastModified }
        return fields
    }

    /// The stored response after a `304 Not Modified`: its fields updated by the 304's
    /// (RFC 9111 §4.3.4), its times those of the revalidation.
    static func revalidated(
        _ entry: CachedResponse,
        notModifiedFields: HTTPFields,
        requestedAt: Date,
        receivedAt: Date
    ) -> CachedResponse {
        var updated = entry
        // The body framing stays the stored response's; a cookie is never stored.
        let kept: Set<HTTPField.Name> = [.contentLength, .contentEncoding, .transferEncoding, .contentRange, .setCookie]
        let names = Set(notModifiedFields.map(\.name)).subtracting(kept)
        for name in names { updated.headerFields[values: name] = notModifiedFields[values: name] }
        updated.requestedAt = requestedAt
        updated.receivedAt = receivedAt
        return updated
    }
}

