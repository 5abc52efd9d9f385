import CurlQueueDemoServer
import Foundation
import NIOCore
import NIOHTTP1

/// `/auth/…`: an OAuth2-style token endpoint and resources it protects, per realm.
///
/// - `/auth/token/REALM`: answers `{"access_token":"REALM-N"}` for its N-th success, if the
///   request carries `Authorization: Basic base64(client:secret)` (else 401).
///   `failures=K` answers 500 to the first K requests (they count), `status=S` with S instead;
///   `garbage=1` answers every request 200 with a body that is not JSON.
/// - `/auth/protected/REALM`: 200 "ok REALM" if the request carries the realm's latest token
///   as `Authorization: Bearer REALM-N`, else 401 with `WWW-Authenticate: Bearer`. Fetching a
///   new token therefore expires the old one. `cc=TEXT` adds `Cache-Control: TEXT` to the 200.
///
/// Hits are counted under `token-REALM`, `issued-REALM` (successful token answers) and
/// `protected-REALM` (``FixtureServer/hits(_:)``).
extension Routes {
    static let tokenClientCredentials = "Basic " + Data("client:secret".utf8).base64EncodedString()

    static func auth(target: RequestTarget, headers: HTTPHeaders, state: ServerState) -> ResponsePlan {
        let segments = target.segments
        guard segments.count == 3, !segments[2].isEmpty else { return .fixed(.text(.notFound, "not found")) }
        let realm = segments[2]
        switch segments[1] {
        case "token":
            let hit = state.recordFlakyHit("token-\(realm)")
            guard headers.first(name: "authorization") == tokenClientCredentials else {
                return .fixed(.text(.unauthorized, "bad client credentials"))
            }
            if target.int("garbage") == 1 {
                return .fixed(.text(.ok, "<html>not a token \(hit)</html>"))
            }
            if hit <= (target.int("failures") ?? 0) {
                return .fixed(.text(HTTPResponseStatus(statusCode: target.int("status") ?? 500), "token failure \(hit)"))
            }
            let issued = state.recordFlakyHit("issued-\(realm)")
            let body = "{\"access_token\":\"\(realm)-\(issued)\",\"token_type\":\"bearer\"}"
            return .fixed(FixedResponse(status: .ok, headers: ["Content-Type": "application/json"], body: ByteBuffer(string: body)))
        case "protected":
            _ = state.recordFlakyHit("protected-\(realm)")
            let issued = state.flakyHitCount("issued-\(realm)")
            if issued > 0, headers.first(name: "authorization") == "Bearer \(realm)-\(issued)" {
                let cacheControl: HTTPHeaders = target.query["cc"].map { ["Cache-Control": $0] } ?? [:]
                return .fixed(.text(.ok, "ok \(realm)", headers: cacheControl))
            }
            return .fixed(.text(.unauthorized, "unauthorized", headers: ["WWW-Authenticate": "Bearer"]))
        default:
            return .fixed(.text(.notFound, "not found"))
        }
    }
}

extension ServerState {
    /// How many times ``recordFlakyHit(_:)`` counted `id`, without counting.
    func flakyHitCount(_ id: String) -> Int {
        mutex.withLockedValue { $0.flakyHits[id] ?? 0 }
    }
}
