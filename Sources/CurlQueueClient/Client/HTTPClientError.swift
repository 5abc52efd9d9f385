public import CurlQueue
public import Foundation
/// Why an ``HTTPClient`` call did not produce its result.
public enum HTTPClientError: Error, CustomStringConvertible {
    /// The path could not be joined to the base URL: it holds a scheme (`https:`), starts
    /// with `//`, holds `?`, `#`, `\`, a control character, or a `.`/`..` segment. Nothing was
    /// sent.
    case invalidPath(String, reason: String)
    /// The body could not be encoded (a JSON encoding error, a multipart field name holding
    /// CR or LF, a part file that cannot be read). Nothing was sent.
    case encoding(String)
    /// The transfer produced no response: no connection, a timeout, an invalid request,
    /// or ``RequestError/cancelled`` when the call was cancelled.
    case transport(RequestError)
    /// The server answered with a status outside 200...299 to a call that asked for a typed
    /// value. The whole response is here, body included.
    case status(Response)
    /// The body could not be decoded as the type asked for. `path` is where in the JSON
    /// document (`$.users[2].name`), `$` for the document itself.
    case decoding(path: String, message: String)
    /// The body does not have the shape the request's ``JSONValidator`` asks for: at `path`,
    /// a value of type `expected` was wanted, and `got` was found (`missing` for an absent key).
    case validation(path: String, expected: String, got: String)
    /// A middleware threw an error of its own.
    case middleware(any Error)
    /// The cache policy was ``CachePolicy/returnCacheDontLoad`` and the response cache had
    /// nothing for this URL; nothing was sent.
    case notCached(URL)

    /// True when the call ended because it was cancelled (its task, its handle, or a batch
    /// that failed fast).
    public var isCancelled: Bool {
        if case .transport(.cancelled) = self { return true }
        return false
    }

    /// The response, for ``status(_:)``.
    public var response: Response? {
        if case .status(let response) = self { return response }
        return nil
    }

    /// A one-line account of the error, for logs and users. URLs in it are redacted by
    /// ``SecretRedactor/standard``: no userinfo, no value of a secret query parameter.
    public var description: String {
        switch self {
        case .invalidPath(let path, let reason):
            return "invalid path \(path.debugDescription): \(reason)"
        case .encoding(let reason):
            return "cannot encode the request body: \(reason)"
        case .transport(let error):
            return "transfer failed: \(error)"
        case .status(let response):
            let url = response.effectiveURL.map { " from \(LoggingMiddleware.redacted($0))" } ?? ""
            let phrase = response.status.reasonPhrase.isEmpty ? "" : " " + response.status.reasonPhrase
            return "unexpected status \(response.status.code)\(phrase)\(url)"
        case .decoding(let path, let message):
            return "cannot decode the response at \(path): \(message)"
        case .validation(let path, let expected, let got):
            return "unexpected JSON at \(path): expected \(expected), got \(got)"
        case .middleware(let error):
            return "middleware failed: \(error)"
        case .notCached(let url):
            return "no cached response for \(LoggingMiddleware.redacted(url)), and the cache policy forbids loading"
        }
    }
}
