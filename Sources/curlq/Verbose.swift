import CurlQueue
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

    static func responseLines(url: URL, status: Int, fields: HTTPFields) -> [String] {
        ["< \(status) (\(redactor.redact(url)))"] + redactor.redact(fields).map { "< " + $0 }
    }
}
