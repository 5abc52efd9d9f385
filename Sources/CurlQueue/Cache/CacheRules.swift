import Foundation
import HTTPTypes

/// HTTP's caching rules for a private cache (RFC 9111), as pure functions of the messages and
/// a clock, so that every rule is tested without a network or a wait.
///
/// Deliberately conservative: no heuristic freshness (a response with no `max-age`,
/// `Expires` or TTL is revalidated or loaded, never guessed fresh), and only `GET` is cached.
enum CacheRules {
    /// The statuses a cache may keep (RFC 9110 §15.1's heuristically cacheable ones, less 206).
    static let cacheableStatuses: Set<Int> = [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501]

    /// The key a response is stored under: the method and the URL without its fragment.
    static func key(method: HTTPRequest.Method, url: URL) -> String {
        var text = url.absoluteString
        if let hash = text.firstIndex(of: "#") { text = String(text[..<hash]) }
        return "\(method.rawValue) \(text)"
    }

    /// Whether a response to this request may be stored.
    static func isStorable(
        method: HTTPRequest.Method,
        requestFields: HTTPFields,
        status: Int,
        responseFields: HTTPFields,
        timeToLive: Duration?
    ) -> Bool {
        guard method == .get, cacheableStatuses.contains(status) else { return false }
        let response = CacheControl(responseFields)
        guard !response.noStore, !CacheControl(requestFields).noStore else { return false }
        guard varyingFields(responseFields: responseFields, requestFields: requestFields) != nil else { return false }
        // Worth keeping only if it can be fresh or can be revalidated.
        return timeToLive != nil || response.maxAge != nil || responseFields[.expires] != nil
            || responseFields[.eTag] != nil || responseFields[.lastModified] != nil
    }

    /// The request's values of the fields the response's `Vary` names, or `nil` for
    /// `Vary: *` (which matches no later request).
    static func varyingFields(responseFields: HTTPFields, requestFields: HTTPFields) -> [String: String]? {
        var result: [String: String] = [:]
        for line in responseFields[values: .vary] {
            for item in line.split(separator: ",") {
                let name = item.trimmingSpaces.lowercased()
                if name == "*" { return nil }
                guard !name.isEmpty, let fieldName = HTTPField.Name(name) else { continue }
                let values = requestFields[values: fieldName]
                if !values.isEmpty { result[name] = values.joined(separator: ", ") }
            }
        }
        return result
    }

    /// Whether a stored response may answer a request with these fields (its `Vary` matches).
    static func matches(_ entry: CachedResponse, requestFields: HTTPFields) -> Bool {
        guard let now = varyingFields(responseFields: entry.headerFields, requestFields: requestFields) else { return false }
        // Every field the response varies on must have the value it had; a field that was
        // absent then must be absent now.
        let names = Set(now.keys).union(entry.varyingRequestFields.keys)
        return names.allSatisfy { now[$0] == entry.varyingRequestFields[$0] }
    }

    /// How long the response is fresh for, from its TTL, `max-age` or `Expires`; `nil` if
    /// none says (RFC 9111 §4.2.1).
    static func freshnessLifetime(_ entry: CachedResponse) -> TimeInterval? {
        if let ttl = entry.timeToLive { return ttl.seconds }
        let control = CacheControl(entry.headerFields)
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
    static func isFresh(_ entry: CachedResponse, requestFields: HTTPFields, now: Date) -> Bool {
        let request = CacheControl(requestFields)
        if request.noCache { return false }
        if entry.timeToLive == nil, CacheControl(entry.headerFields).noCache { return false }
        guard let lifetime = freshnessLifetime(entry) else { return false }
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
        // The body framing stays the stored response's.
        let kept: Set<HTTPField.Name> = [.contentLength, .contentEncoding, .transferEncoding, .contentRange]
        let names = Set(notModifiedFields.map(\.name)).subtracting(kept)
        for name in names { updated.headerFields[values: name] = notModifiedFields[values: name] }
        updated.requestedAt = requestedAt
        updated.receivedAt = receivedAt
        return updated
    }
}

