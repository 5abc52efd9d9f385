public import CurlQueue
import Foundation

extension CurlQueueTransport {
    /// How a call is made: per transport, and changed for some calls by
    /// ``CurlQueueTransport/withConfiguration(_:operation:)`` or ``ConfigurationMiddleware``.
    public struct Configuration: Sendable {
        /// The operation's priority in the queue.
        public var priority: RequestOperation.Priority = .normal
        /// Time limits of each attempt (``Request/Timeouts``: 30 s to connect, 60 s idle, 60 s
        /// for the head, no total, by default).
        public var timeouts: Request.Timeouts = Request.Timeouts()
        /// Whether failed attempts are retried (``RequestOperation/autoRetry``). Off by default:
        /// an API call is not always safe to repeat.
        public var autoRetry = false
        /// How retries are made when ``autoRetry`` is on: attempts, backoff, the statuses
        /// retried, `Retry-After`.
        public var retryPolicy = RetryPolicy()
        /// Whether redirects are followed (up to 10 by default).
        public var redirectPolicy: Request.RedirectPolicy = .follow(max: 10)
        /// Certificate trust for HTTPS.
        public var tls = Request.TLSOptions()
        /// The most body bytes a response may bring, or `nil` for no limit.
        public var maxResponseBodySize: Int64? = nil
        /// A request body whose length is known and at most this many bytes is read into memory
        /// before it is sent, so that a retry or a 307/308 redirect can send it again (JSON
        /// bodies); every other body is streamed as it is produced and sent once
        /// (``RequestBodyStream``). 1 MiB by default; 0 streams every body that is not empty.
        public var requestBodyMemoryLimit = 1 << 20

        /// The defaults.
        public init() {}
    }

    /// The override of the calling task, applied after the transport's configuration.
    @TaskLocal static var taskOverride: (@Sendable (inout Configuration, _ operationID: String) -> Void)?

    /// Runs `operation` with `modify` applied to the configuration of every call it makes through
    /// any `CurlQueueTransport` (in this task and its child tasks), after the overrides of the
    /// tasks around it.
    public static func withConfiguration<Result: Sendable>(
        _ modify: @escaping @Sendable (inout Configuration) -> Void,
        operation: () async throws -> Result
    ) async rethrows -> Result {
        try await withOperationConfiguration({ configuration, _ in modify(&configuration) }, operation: operation)
    }

    /// As ``withConfiguration(_:operation:)``, with the operation ID of each call given to `modify`.
    static func withOperationConfiguration<Result: Sendable>(
        _ modify: @escaping @Sendable (inout Configuration, String) -> Void,
        operation: () async throws -> Result
    ) async rethrows -> Result {
        let outer = taskOverride
        return try await $taskOverride.withValue({ configuration, id in
            outer?(&configuration, id)
            modify(&configuration, id)
        }, operation: operation)
    }
}
