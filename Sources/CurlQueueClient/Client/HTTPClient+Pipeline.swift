import CurlQueue
import Foundation
import HTTPTypes

extension HTTPClient {
    /// Runs one call to its end: builds the request, sends it down the middleware stack and
    /// the queue, and makes the output. Cancelling the calling task cancels the transfer.
    func execute<R: APIRequest>(_ apiRequest: R) async throws(HTTPClientError) -> R.Output {
        let request = try makeRequest(for: apiRequest)
        let retry = apiRequest.retry ?? configuration.retry
        let cachePolicy = apiRequest.cachePolicy ?? configuration.cachePolicy ?? HTTPClient.defaults.cachePolicy
        let response: Response
        do {
            response = try await runMiddleware(from: 0, request) { request throws(HTTPClientError) in
                try await self.cachedTransfer(request, retry: retry, policy: cachePolicy, timeToLive: apiRequest.cacheTTL)
            }
        } catch {
            throw Self.clientError(error)
        }
        if Task.isCancelled { throw .transport(.cancelled) }
        return try output(of: apiRequest, from: response)
    }

    /// The ``Request`` for a call: URL, header fields (defaults merged), body, time limits and
    /// a download file.
    func makeRequest<R: APIRequest>(for apiRequest: R) throws(HTTPClientError) -> Request {
        let url = try url(for: apiRequest.path, query: apiRequest.query, useCDN: apiRequest.useCDN)
        var fields = configuration.headerFields
        for name in Set(apiRequest.headerFields.map(\.name)) {
            fields[fields: name] = []
        }
        fields.append(contentsOf: apiRequest.headerFields)
        var request = Request(url: url, method: apiRequest.method,
                              timeouts: apiRequest.timeouts ?? configuration.timeouts ?? HTTPClient.defaults.timeouts)
        request.tls = apiRequest.tls ?? configuration.tls
        if let body = apiRequest.body {
            let (encoded, contentType) = try body.encoded(with: configuration.jsonEncoder)
            request.body = encoded
            if let contentType, fields[.contentType] == nil {
                fields[.contentType] = contentType
            }
        }
        request.headerFields = fields
        if let destination = apiRequest.resumableDownloadDestination {
            request.destination = destination
            request.resume = true
        }
        return request
    }

    /// Middleware `index` and the ones after it, then `transfer`.
    func runMiddleware(
        from index: Int,
        _ request: Request,
        transfer: (Request) async throws(HTTPClientError) -> Response
    ) async throws -> Response {
        let stack = configuration.middleware
        guard index < stack.count else { return try await transfer(request) }
        return try await stack[index].intercept(request) { request in
            try await runMiddleware(from: index + 1, request, transfer: transfer)
        }
    }

    /// The bottom of the stack: the response cache, if the client has one, in front of the
    /// transfer.
    private func cachedTransfer(
        _ request: Request, retry: RetrySettings, policy: CachePolicy, timeToLive: Duration?
    ) async throws(HTTPClientError) -> Response {
        guard let cache = configuration.responseCache else { return try await transfer(request, retry: retry) }
        do {
            return try await cache.response(for: request, policy: policy, timeToLive: timeToLive) { request in
                try await self.transfer(request, retry: retry)
            }
        } catch let miss as ResponseCacheMiss {
            throw .notCached(miss.url)
        } catch {
            throw Self.clientError(error)
        }
    }

    /// An operation for `request` with the call's retry settings, not yet queued.
    func makeOperation(_ request: Request, retry: RetrySettings) -> RequestOperation {
        let operation = RequestOperation(request: request)
        if retry.autoRetry {
            operation.autoRetry = true
            operation.retryPolicy = retry.policy
            operation.autoRetryErrorCodes = retry.errorCodes
        }
        return operation
    }

    /// One operation on the client's queue, shared with the client's other calls of an equal
    /// GET or HEAD in flight (``Coalescer``).
    private func transfer(_ request: Request, retry: RetrySettings) async throws(HTTPClientError) -> Response {
        if Task.isCancelled { throw .transport(.cancelled) }
        if Coalescer.isShareable(request) {
            let queue = configuration.queue
            let result = await inFlight.response(
                for: Coalescer.Key(request: request, retry: retry),
                makeOperation: { makeOperation(request, retry: retry) },
                add: { try? queue.add($0) }  // fails only when every caller was cancelled first
            )
            do {
                return try result.get()
            } catch {
                throw .transport(error)
            }
        }
        let operation = makeOperation(request, retry: retry)
        try! configuration.queue.add(operation)  // a new operation cannot have been started
        do {
            return try await operation.response()
        } catch {
            throw .transport(error)
        }
    }

    /// The call's output from its final response.
    private func output<R: APIRequest>(of apiRequest: R, from response: Response) throws(HTTPClientError) -> R.Output {
        if R.Output.self == Response.self, let response = response as? R.Output { return response }  // as it is, any status
        guard (200...299).contains(response.status.code) else { throw .status(response) }
        if let validator = apiRequest.validator {
            try validator.validate(response.body)
        }
        do {
            return try apiRequest.decode(response, using: configuration.jsonDecoder)
        } catch {
            throw HTTPClientError(decoding: error)
        }
    }

    static func clientError(_ error: any Error) -> HTTPClientError {
        switch error {
        case let error as HTTPClientError: return error
        case is CancellationError: return .transport(.cancelled)
        default: return .middleware(error)
        }
    }
}
