public import Foundation
public import HTTPTypes
public import OpenAPIRuntime

/// A client middleware that changes the ``CurlQueueTransport/Configuration`` of the calls it
/// sees, by operation ID: a higher priority for one operation, a longer timeout or retries for
/// another. Has no effect on other transports.
///
/// Middlewares run in the calling task, so `modify` applies to the transport's call made by the
/// `next` it wraps; it runs after the transport's configuration and the task's overrides.
public struct ConfigurationMiddleware: ClientMiddleware {
    let modify: @Sendable (inout CurlQueueTransport.Configuration, _ operationID: String) -> Void

    /// Creates a middleware that calls `modify` for every call, with its operation ID.
    public init(_ modify: @escaping @Sendable (inout CurlQueueTransport.Configuration, _ operationID: String) -> Void) {
        self.modify = modify
    }

    /// Calls `next` with the configuration changed.
    public func intercept(
        _ request: HTTPRequest,
        body: HTTPBody?,
        baseURL: URL,
        operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        try await CurlQueueTransport.withOperationConfiguration(modify) {
            try await next(request, body, baseURL)
        }
    }
}
