public import CurlQueue
public import Foundation
public import HTTPTypes
public import OpenAPIRuntime

/// A `ClientTransport` for clients made by swift-openapi-generator that sends every call as a
/// ``RequestOperation`` in a CurlQueue ``RequestQueue``: the queue's concurrency limits (overall
/// and per host), priorities, retries with backoff and `Retry-After`, and libcurl's connections
/// shared with everything else the process sends.
///
/// Contracts:
/// - `send` returns once the head of the final response has arrived (redirects followed, retries
///   done); the body is an `HTTPBody` that yields the bytes as they arrive, iterable once. A slow
///   consumer pauses the transfer (at most about 1 MiB waits in memory), as
///   `RequestQueue.stream(_:)` does.
/// - Request bodies are streamed: libcurl sends each chunk as the `HTTPBody` yields it, with
///   backpressure (the body is not asked for its next chunk while about 1 MiB waits to be sent),
///   `Content-Length` when the body's length is known, chunked otherwise (``RequestBodyStream``).
///   Only a body of known length up to ``Configuration/requestBodyMemoryLimit`` (1 MiB; JSON
///   bodies) is read into memory first, so that a retry or a 307/308 redirect can send it again;
///   a streamed body is sent once, and a retry after its first byte was sent fails with
///   ``RequestError/invalidRequest(_:)``.
/// - Cancelling the calling task while it waits for the head, or while it iterates the body,
///   cancels the operation: the connection is closed and the call throws
///   ``RequestError/cancelled``. Dropping a response body without reading it to the end does the
///   same.
/// - Failures are thrown as ``RequestError``; the generated client wraps them in its
///   `ClientError`, whose `underlyingError` is the ``RequestError`` (timeouts, libcurl's code and
///   message in ``RequestError/transportFailure``).
/// - The queue decides duplicates by request equality: the queue this transport makes allows
///   duplicates; a queue passed in should set ``RequestQueue/allowDuplicateRequests`` unless the
///   caller wants equal calls to cancel each other.
public struct CurlQueueTransport: ClientTransport {
    /// The queue every call is added to.
    public let queue: RequestQueue
    /// How calls are made, unless a task-local override (``withConfiguration(_:operation:)``) or
    /// ``ConfigurationMiddleware`` changes it for some of them.
    public var configuration: Configuration

    /// Creates a transport on `queue`.
    public init(queue: RequestQueue, configuration: Configuration = Configuration()) {
        self.queue = queue
        self.configuration = configuration
    }

    /// Creates a transport on a queue of its own that runs up to `maxConcurrentRequestCount`
    /// calls at once and allows duplicate requests.
    public init(maxConcurrentRequestCount: Int = 64, configuration: Configuration = Configuration()) {
        let queue = RequestQueue(maxConcurrentRequestCount: maxConcurrentRequestCount)
        queue.allowDuplicateRequests = true
        self.init(queue: queue, configuration: configuration)
    }

    /// Sends `request` with `body` to `baseURL` and returns the response head with its body
    /// still arriving. Throws ``RequestError`` (or the error the request body's sequence threw).
    public func send(
        _ request: HTTPRequest,
        body: HTTPBody?,
        baseURL: URL,
        operationID: String
    ) async throws -> (HTTPResponse, HTTPBody?) {
        var configuration = self.configuration
        Self.taskOverride?(&configuration, operationID)

        var outgoing = Request(string: Self.join(baseURL, request.path ?? "/"), method: request.method)
        var fields = request.headerFields
        // The engine frames the body itself (Content-Length from the body's length, else chunked).
        fields[.contentLength] = nil
        fields[.transferEncoding] = nil
        outgoing.headerFields = fields
        outgoing.timeouts = configuration.timeouts
        outgoing.redirectPolicy = configuration.redirectPolicy
        outgoing.tls = configuration.tls
        outgoing.maxResponseBodySize = configuration.maxResponseBodySize

        let stream: RequestBodyStream?
        (outgoing.body, stream) = try await Self.requestBody(body, memoryLimit: configuration.requestBodyMemoryLimit)

        let operation = RequestOperation(request: outgoing)
        operation.priority = configuration.priority
        operation.autoRetry = configuration.autoRetry
        operation.retryPolicy = configuration.retryPolicy
        let response: StreamingResponse
        do {
            response = try await queue.stream(operation)
        } catch {
            // The body's own failure, as the generated client would get it from any transport.
            throw stream?.producerError ?? error
        }

        let head = HTTPResponse(status: response.status, headerFields: response.headerFields)
        return (head, try await Self.responseBody(response, method: request.method))
    }

    /// `baseURL` (less a trailing `/`) followed by `path`, which starts with `/`.
    static func join(_ baseURL: URL, _ path: String) -> String {
        var base = baseURL.absoluteString
        if base.hasSuffix("/") { base.removeLast() }
        return path.hasPrefix("/") ? base + path : base + "/" + path
    }
}
