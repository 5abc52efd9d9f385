public import CurlQueue
public import Dispatch
public import Foundation

/// A client for one HTTP API: a base URL (and optionally a CDN URL), default header fields,
/// timeouts and retry settings, a middleware stack, and the ``RequestQueue`` its transfers
/// run on.
///
/// ```swift
/// let client = HTTPClient(configuration: .init(baseURL: URL(string: "https://api.example.org/v1/")!))
/// let user = try await client.get("users/1", as: User.self)
/// ```
///
/// A client is immutable and `Sendable`: make one per API and share it. Every call comes in
/// three styles — `async` (cancelled with its task), completion closures and a delegate (both
/// return a ``RequestHandle``) — and every call, whatever its style, runs the same way:
///
/// 1. The path is joined to the base (or CDN) URL; a path that could leave that origin is
///    refused with ``HTTPClientError/invalidPath(_:reason:)`` and nothing is sent.
/// 2. The request goes down the middleware stack in order, then to the queue as a
///    ``RequestOperation``; the response comes back up the stack in reverse order.
/// 3. A call that asked for a typed value fails with ``HTTPClientError/status(_:)`` on a
///    non-2xx response; otherwise the body is checked by the request's ``JSONValidator``, if
///    any, and decoded.
///
/// Calls of one client that reach the transfer (past the middleware and the cache) with equal
/// GETs or HEADs while one of them is in flight share that one transfer, and each gets its
/// response:
/// - Shared: a GET or HEAD with no body, no download file (``APIRequest/resumableDownloadDestination``)
///   and no resume, whose ``Request`` equals the one in flight — same URL, same header fields
///   (credentials included: another `Authorization` value is another transfer), same time
///   limits, TLS settings and limits — and whose retry settings are equal.
/// - Not shared: any other method, a request with a body, a download to a file, a streaming
///   call (`stream…`), a call of another client, and a call made after the shared transfer's
///   outcome was decided (a transfer is shared only while it is in flight; the response cache,
///   if any, is what answers later calls).
/// - Cancelling one caller ends that call at once with `.transport(.cancelled)`; the transfer
///   goes on for the others, and is cancelled only when every caller sharing it has cancelled.
///
/// No call is ever cancelled because another, equal one started, unless the client was given
/// a queue whose duplicate rule does that (``Configuration-swift.struct/queue``).
///
/// No lock of the client is held while user code (middleware, closures, delegates) runs, and
/// no closure or delegate method ever runs on CurlQueue's engine thread.
public final class HTTPClient: Sendable {
    /// The client's settings, fixed at creation.
    public let configuration: Configuration

    /// The serial queue completion closures and delegate methods run on unless the
    /// configuration names another.
    public static let defaultCallbackQueue = DispatchQueue(label: "CurlQueue.HTTPClient.callbacks")

    /// The queue of every client whose configuration names none: made as ``RequestQueue/main``
    /// is (two transfers at once, first in first out), but with
    /// ``RequestQueue/allowDuplicateRequests`` on, so that no call is ever cancelled because
    /// another, equal one started. It is not ``RequestQueue/main``, whose duplicate rule
    /// cancels an earlier equal request.
    public static let defaultQueue: RequestQueue = {
        let queue = RequestQueue()
        queue.allowDuplicateRequests = true
        return queue
    }()

    /// The client's calls of equal GETs and HEADs in flight, which share one transfer.
    let inFlight = Coalescer()

    /// Creates a client.
    public init(configuration: Configuration) {
        self.configuration = configuration
    }

    /// Creates a client for `baseURL` with default settings, apart from the middleware stack.
    public convenience init(baseURL: URL, middleware: [any HTTPClientMiddleware] = []) {
        var configuration = Configuration(baseURL: baseURL)
        configuration.middleware = middleware
        self.init(configuration: configuration)
    }
}
