import CCurl
import Foundation
import HTTPTypes

// Redirects that carry the caller's header fields.
//
// libcurl follows redirects inside one transfer and sends every custom header field on each
// request of the chain: it drops only `Authorization` and `Cookie` when the host changes, so an
// `X-Api-Key` or `Proxy-Authorization` reached whatever server a redirect named. It cannot change
// the fields of a transfer under way. So a request that follows redirects and carries a field
// outside ``Request/fieldsSentToAnyOrigin`` follows them here, one hop at a time: libcurl's
// `CURLOPT_FOLLOWLOCATION` is off, the 3xx ends the run, and the transfer runs again (as a
// restart does: same attempt, same operation) for the URL libcurl resolved
// (`CURLINFO_REDIRECT_URL`), with the method rules libcurl applies and, from the first hop that
// leaves the request's origin on, only the fields allowed there. Requests without such fields
// keep libcurl's own following, as before.

extension Attempt {
    /// Whether this transfer must follow redirects itself: it follows them and carries a field
    /// that may not go to every origin.
    var mustFollowRedirectsItself: Bool {
        guard case .follow = request.redirectPolicy, !request.headerFields.isEmpty else { return false }
        return request.headerFields.contains { !Request.fieldsSentToAnyOrigin.contains($0.name) }
    }

    /// The next hop after a response with this status, for a transfer that follows redirects
    /// itself: `.restart` with ``request`` set to the next hop's, a failure (too many
    /// redirects, a scheme not allowed), or nil when the response is the final one.
    func followRedirect(_ easy: UnsafeMutableRawPointer, status: Int) -> Completion? {
        guard followsRedirectsItself == true, !stoppedAtSeeOther, case .follow(let max) = request.redirectPolicy,
              status == 301 || status == 302 || status == 303 || status == 307 || status == 308 else { return nil }
        var pointer: UnsafeMutablePointer<CChar>?
        guard ccurl_easy_getinfo_string(easy, CURLINFO_REDIRECT_URL, &pointer) == CURLE_OK, let pointer else { return nil }
        let location = String(cString: pointer)
        guard redirectsFollowed < Swift.max(0, max) else {
            return .finished(.failure(.transport(TransportFailure(
                code: .tooManyRedirects, message: "Maximum (\(Swift.max(0, max))) redirects followed"))))
        }
        guard let next = URL(string: location), let scheme = next.scheme?.lowercased(),
              request.allowedSchemes.contains(where: { $0.lowercased() == scheme }) else {
            return .finished(.failure(.transport(TransportFailure(
                code: .unsupportedProtocol, message: "the redirect to \(location) is not allowed: its scheme is not one of the request's"))))
        }
        var hop = request
        hop.url = next
        // The method and body, as libcurl 7.88 changes them (without CURLOPT_POSTREDIR).
        switch status {
        case 301, 302:
            if hop.method == .post {
                hop.method = .get
                hop.body = nil
            }
        case 303:
            if hop.method != .head { hop.method = .get }
            hop.body = nil
        default:
            break  // 307, 308: the same method and body
        }
        if !leftOrigin, Self.origin(of: next) != URL(string: urlString).flatMap(Self.origin(of:)) {
            leftOrigin = true
            let allowed = request.fieldsAllowedAcrossOrigins
            hop.headerFields = HTTPFields(hop.headerFields.filter {
                Request.fieldsSentToAnyOrigin.contains($0.name) || allowed.contains($0.name)
            })
        }
        request = hop
        redirectsFollowed += 1
        return .restart
    }

    struct Origin: Equatable {
        var scheme: String
        var host: String
        var port: Int
    }

    /// Scheme, host and port (the scheme's default port when none is given), lowercased.
    static func origin(of url: URL) -> Origin? {
        guard let scheme = url.scheme?.lowercased() else { return nil }
        let port = url.port ?? (scheme == "https" ? 443 : scheme == "http" ? 80 : -1)
        return Origin(scheme: scheme, host: url.host?.lowercased() ?? "", port: port)
    }
}
