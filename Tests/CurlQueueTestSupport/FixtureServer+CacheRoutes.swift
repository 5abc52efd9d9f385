import CurlQueueDemoServer
import Foundation
import NIOCore
import NIOHTTP1

/// `/cache/ID`: a resource with the caching fields a test asks for. Its body is
/// `ID #N` for the N-th request that got a body, so a test sees whether an answer came from
/// the server or from a cache; hits are counted under `cache-ID` (``FixtureServer/hits(_:)``).
///
/// - `maxAge=S`: `Cache-Control: max-age=S`; `cc=TEXT`: that `Cache-Control` instead.
/// - `etag=E`: `ETag: "E"`; a request with `If-None-Match: "E"` gets `304 Not Modified`.
/// - `lastModified=1`: a fixed `Last-Modified`; a request with that `If-Modified-Since` gets 304.
/// - `expires=S`: `Date` (now) and `Expires` S seconds after it; `expires=bad`: `Expires: 0`.
/// - `age=TEXT`: `Age: TEXT`, as it is (a test may send a malformed or huge one).
///   Only this option sends `Date`, so that tests may judge freshness by a clock of their own.
/// - `vary=NAME`: `Vary: NAME`, and the body ends with ` NAME=<the request's value>` (not
///   with `quietVary=1`, for a value that must not be in the body).
/// - `status=S`: that status instead of 200.
/// - `setCookie=V`: `Set-Cookie: V`.
/// - `cc304=TEXT`, `setCookie304=V`: that `Cache-Control` or `Set-Cookie` on a 304 only.
extension Routes {
    static let cacheLastModified = "Tue, 14 Nov 2023 22:13:20 GMT"

    static func cache(id: String, target: RequestTarget, headers: HTTPHeaders, state: ServerState) -> ResponsePlan {
        _ = state.recordFlakyHit("cache-\(id)")
        var fields: HTTPHeaders = ["Content-Type": "text/plain"]
        if let maxAge = target.int("maxAge") { fields.add(name: "Cache-Control", value: "max-age=\(maxAge)") }
        if let control = target.query["cc"] { fields.add(name: "Cache-Control", value: control) }
        let now = Int(Date().timeIntervalSince1970)
        if let expires = target.query["expires"] {
            fields.add(name: "Date", value: HTTPDateFormatter.imfFixdate(secondsSince1970: now))
            fields.add(name: "Expires", value: Int(expires).map { HTTPDateFormatter.imfFixdate(secondsSince1970: now + $0) } ?? "0")
        }
        if let age = target.query["age"] { fields.add(name: "Age", value: age) }
        if let cookie = target.query["setCookie"] { fields.add(name: "Set-Cookie", value: cookie) }
        var notModified = false
        if let eTag = target.query["etag"] {
            fields.add(name: "ETag", value: "\"\(eTag)\"")
            notModified = headers.first(name: "if-none-match") == "\"\(eTag)\""
        }
        if target.flag("lastModified") {
            fields.add(name: "Last-Modified", value: cacheLastModified)
            notModified = notModified || headers.first(name: "if-modified-since") == cacheLastModified
        }
        var suffix = ""
        if let vary = target.query["vary"] {
            fields.add(name: "Vary", value: vary)
            suffix = target.flag("quietVary") ? "" : " \(vary)=\(headers.first(name: vary) ?? "")"
        }
        if notModified {
            if let control = target.query["cc304"] { fields.add(name: "Cache-Control", value: control) }
            if let cookie = target.query["setCookie304"] { fields.add(name: "Set-Cookie", value: cookie) }
            return .fixed(FixedResponse(status: .notModified, headers: fields, body: ByteBuffer()))
        }
        let served = state.recordFlakyHit("cache-body-\(id)")
        let status = HTTPResponseStatus(statusCode: target.int("status") ?? 200)
        return .fixed(FixedResponse(status: status, headers: fields, body: ByteBuffer(string: "\(id) #\(served)\(suffix)")))
    }
}
