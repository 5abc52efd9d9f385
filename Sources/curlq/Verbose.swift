import CurlQueue
import CurlQueueDownloads
import Foundation
import HTTPTypes

/// `-v/--verbose`: the head of each request curlq makes and of the response that ended it,
/// as curl shows them (`> ` sent, `< ` received), secrets hidden.
///
/// What is hidden, by ``SecretRedactor/standard`` (the rule the library's logs use): the value
/// of every field whose name looks secret (`Authorization`, `Proxy-Authorization`, `Cookie`,
/// `Set-Cookie`, `X-Api-Key`, any `…token`…) as `<redacted>`, and in URLs the userinfo and
/// secret query values as `REDACTED`. Every line goes through `Format.safe`, so a server's
/// field cannot move the cursor or forge a line.
///
/// The request head is what curlq sets: the method, the URL and its fields (`-H`, `header=`,
/// `-A`, the credentials). libcurl adds `Host`, and `Range`/`If-Range` on a resume; they are
/// not shown. The response head is the final response's (after redirects and retries).
enum Verbose {
    static let redactor = SecretRedactor.standard

    static func requestLines(method: String, url: URL, fields: [HeaderField]) -> [String] {
        ["> \(method) \(redactor.redact(url))"] + fields.map { field in
            "> \(field.name): \(redactor.isSecret(field.name) ? "<redacted>" : field.value)"
        }
    }

    /// Where redirects led (`*` lines, as curl's notes), and the fields the engine did not carry
    /// to another origin (``Request/fieldsAllowedAcrossOrigins``), by name: a `-u`, `-H` or
    /// cookie that the final server never got is said, never shown. Only the first and last
    /// URL are known here, not the hops between.
    static func redirectLines(url: URL, response: Response, fields: [HeaderField]) -> [String] {
        let count = response.metrics.redirectCount
        guard count > 0, let final = response.effectiveURL else { return [] }
        var lines = ["* followed \(count) redirect\(count == 1 ? "" : "s") to \(redactor.redact(final))"]
        if origin(final) != origin(url) {
            var names: [String] = []
            for field in fields where !Request.fieldsSentToAnyOrigin.contains(HTTPField.Name(field.name) ?? .accept) {
                if !names.contains(where: { $0.lowercased() == field.name.lowercased() }) { names.append(field.name) }
            }
            if !names.isEmpty {
                lines.append("* not sent past the redirect to another origin (\(origin(final))): \(names.joined(separator: ", "))")
            }
        }
        return lines
    }

    /// `scheme://host:port`, lowercased, the scheme's port when none is given.
    static func origin(_ url: URL) -> String {
        let scheme = url.scheme?.lowercased() ?? ""
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\(url.host?.lowercased() ?? ""):\(port)"
    }

    static func responseLines(url: URL, status: Int, fields: HTTPFields) -> [String] {
        ["< \(status) (\(redactor.redact(url)))"] + redactor.redact(fields).map { "< " + $0 }
    }
}
