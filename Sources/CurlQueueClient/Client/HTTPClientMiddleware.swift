public import CurlQueue

/// One layer of an ``HTTPClient``'s middleware stack (Faraday's Rack stack).
///
/// Each middleware gets the request on its way out and passes it on with `next`, which
/// returns the response of the layers below it (the last of them runs the transfer). So the
/// stack `[A, B]` runs A's code before `next`, then B's, then the transfer, then B's code
/// after `next`, then A's. A middleware may:
/// - rewrite the request before passing it on (add query items, sign it);
/// - answer by itself without calling `next` (a cache, a stub);
/// - call `next` again (retry on a 401 once a token is refreshed);
/// - look at the request and the response (logging, metrics).
///
/// Contracts:
/// - `intercept` runs in the calling task of the client call (for closure and delegate calls,
///   a task the client starts), never on the engine thread and never under a lock; it may
///   await and suspend freely.
/// - `next` throws ``HTTPClientError``: `.transport(.cancelled)` once the call is
///   cancelled. Any HTTP status is a response, not an error, at this level.
/// - An error a middleware throws ends the call: an ``HTTPClientError`` as it is, any other
///   as ``HTTPClientError/middleware(_:)``.
/// - The same middleware value serves every call of the client, concurrently: it must be
///   `Sendable` and keep any state of its own safe.
public protocol HTTPClientMiddleware: Sendable {
    /// Handles one request: passes it (possibly changed) to `next` and returns the response
    /// (possibly changed), or answers by itself.
    func intercept(_ request: Request, next: (Request) async throws -> Response) async throws -> Response
}
