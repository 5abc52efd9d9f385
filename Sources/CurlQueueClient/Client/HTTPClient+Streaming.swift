public import CurlQueue
public import Foundation
public import HTTPTypes

/// Calls whose response body is delivered in chunks as it arrives: chunked and long-lived
/// responses (heartbeats, NDJSON, server-sent events), Faraday's chunked responses.
///
/// - The request passes through the middleware stack like any other. A middleware sees a
///   ``Response`` with the streamed response's status and header fields and an empty body
///   (logging, and an authenticator's 401 handling, work as usual); a middleware that calls
///   `next` again replaces the stream, and the one it replaced is cancelled.
/// - The response cache is not used: a streamed body is never stored nor answered from a cache.
/// - Any status is streamed; check ``StreamingResponse/status``.
/// - The stream's own contracts hold (``StreamingResponse``): chunks in order, bounded
///   buffering with backpressure, no retry once the head is handed over, and leaving the loop
///   early or cancelling the task cancels the transfer.
extension HTTPClient {
    /// Streams the response to a request object. `Output` and the validator play no part.
    public func stream<R: APIRequest>(_ apiRequest: R) async throws(HTTPClientError) -> StreamingResponse {
        let request = try makeRequest(for: apiRequest)
        let retry = apiRequest.retry ?? configuration.retry
        let latest = Locked<StreamingResponse?>(nil)
        do {
            _ = try await runMiddleware(from: 0, request) { request throws(HTTPClientError) in
                let streaming = try await self.streamTransfer(request, retry: retry)
                // A second pass (a middleware's retry) replaces, and so cancels, the first.
                let replaced = latest.withLock { latest in
                    defer { latest = streaming }
                    return latest
                }
                _ = replaced
                return Response(status: streaming.status, headerFields: streaming.headerFields, body: Data(), fileURL: nil,
                                effectiveURL: request.url, httpVersion: .http1_1, metrics: TransferMetrics(), attempts: 1)
            }
        } catch {
            throw Self.clientError(error)
        }
        guard let streaming = latest.withLock({ $0 }) else {
            throw .middleware(StreamAnsweredByMiddleware())
        }
        return streaming
    }

    /// Streams the response to a request with any method.
    public func stream(
        _ method: HTTPRequest.Method = .get, _ path: String, query: [URLQueryItem] = [],
        headerFields: HTTPFields = [:], body: Body? = nil
    ) async throws(HTTPClientError) -> StreamingResponse {
        try await stream(AdHocRequest(method, path, query: query, headerFields: headerFields, body: body))
    }

    /// Streams the response to a request object into closures: `onHead` once the head is
    /// there, `onChunk` for each chunk in order, then exactly one of `onSuccess` (the body
    /// ended) and `onError`. All on the configuration's callback queue. The next chunk is not
    /// taken before `onChunk` has returned, so a slow `onChunk` slows the transfer down
    /// instead of filling memory.
    @discardableResult
    public func stream<R: APIRequest>(
        _ request: R, lifetime: RequestHandle.Lifetime = .managed,
        onStart: (@Sendable () -> Void)? = nil,
        onHead: @escaping @Sendable (ResponseHead) -> Void = { _ in },
        onChunk: @escaping @Sendable (Data) -> Void,
        onSuccess: @escaping @Sendable () -> Void,
        onError: @escaping @Sendable (HTTPClientError) -> Void
    ) -> RequestHandle {
        var startCallback: (@Sendable (RequestHandle.ID) -> Void)?
        if let onStart { startCallback = { _ in onStart() } }
        let callbacks = Callbacks<Void>(onStart: startCallback) { _, result in
            switch result {
            case .success: onSuccess()
            case .failure(let error): onError(error)
            }
        }
        let queue = configuration.callbackQueue
        return start(lifetime: lifetime, callbacks: callbacks) { [self] () async throws(HTTPClientError) -> Void in
            let streaming = try await stream(request)
            await Self.run(on: queue) { onHead(streaming.head) }
            var chunks = streaming.body.makeAsyncIterator()
            do throws(RequestError) {
                while let chunk = try await chunks.next() {
                    await Self.run(on: queue) { onChunk(chunk) }
                }
            } catch {
                throw .transport(error)
            }
        }
    }

    /// The bottom of a streamed call's stack: one streamed operation on the client's queue.
    private func streamTransfer(_ request: Request, retry: RetrySettings) async throws(HTTPClientError) -> StreamingResponse {
        if Task.isCancelled { throw .transport(.cancelled) }
        let operation = makeOperation(request, retry: retry)
        do {
            return try await configuration.queue.stream(operation)
        } catch {
            throw .transport(error)
        }
    }

    /// Runs `work` on `queue` and waits for it to return.
    private static func run(on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                work()
                continuation.resume()
            }
        }
    }
}

/// A middleware answered a streamed call by itself: there is no stream to hand over.
struct StreamAnsweredByMiddleware: Error, CustomStringConvertible {
    var description: String { "a middleware answered a streamed call without streaming it" }
}
