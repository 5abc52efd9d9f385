public import Foundation
public import HTTPTypes

/// The status and header fields of a response whose body is streamed.
public struct ResponseHead: Hashable, Sendable {
    /// The status of the final response (after redirects).
    public var status: HTTPResponse.Status
    /// Its header fields, in the order received.
    public var headerFields: HTTPFields

    /// Creates a head.
    public init(status: HTTPResponse.Status, headerFields: HTTPFields) {
        self.status = status
        self.headerFields = headerFields
    }
}

/// A response whose head has arrived and whose body is still arriving, from
/// ``RequestQueue/stream(_:)`` or ``RequestOperation/stream()``.
///
/// Contracts:
/// - The head is that of the final response: redirects that are followed and statuses that
///   ``RequestOperation/autoRetry`` would retry are not handed over. Once it is, the operation
///   is not retried: a failure ends ``body`` with the error.
/// - ``body`` yields the body's chunks in order, as they arrive, then ends; or throws the
///   ``RequestError`` the transfer failed with (after the chunks that arrived before it).
/// - Leaving the loop early (`break`, a throw), dropping the response without iterating, or
///   cancelling the iterating task cancels the operation; the iteration then ends with
///   ``RequestError/cancelled`` (chunks not yet taken are dropped).
/// - Chunks not yet taken stay bounded: past 1 MiB the transfer pauses (libcurl stops reading
///   the socket) until the consumer has taken all but 256 KiB of them.
public struct StreamingResponse: Sendable {
    /// The status and header fields.
    public let head: ResponseHead
    /// The body's chunks as they arrive. Iterate it once.
    public let body: ResponseBody

    /// The status of the final response.
    public var status: HTTPResponse.Status { head.status }
    /// Its header fields, in the order received.
    public var headerFields: HTTPFields { head.headerFields }

    init(head: ResponseHead, stream: BodyStream, operation: RequestOperation) {
        self.head = head
        self.body = ResponseBody(stream: stream, operation: operation)
    }
}

/// The body of a ``StreamingResponse``: its chunks in order, as they arrive. Single-pass: make
/// one iterator. Ending the iteration early, or dropping the sequence without iterating it,
/// cancels the operation.
public struct ResponseBody: AsyncSequence, Sendable {
    /// A chunk of the body, as libcurl received it (its size is the network's, not a line's).
    public typealias Element = Data
    /// The transfer's failure, ``RequestError/cancelled`` included.
    public typealias Failure = RequestError

    let stream: BodyStream
    let operation: RequestOperation
    /// Cancels the operation when the sequence (and every copy of it) is gone.
    private let owner: CancelOnDrop

    init(stream: BodyStream, operation: RequestOperation) {
        self.stream = stream
        self.operation = operation
        self.owner = CancelOnDrop(operation)
    }

    /// Makes the iterator. Its end — or the end of every copy of it — before the body's end
    /// cancels the operation; the sequence going away while the iterator lives does not
    /// (`for try await chunk in try await queue.stream(request).body` drops the sequence as
    /// soon as the loop has its iterator).
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(stream: stream, operation: operation, sequenceOwner: owner)
    }

    /// Iterates the chunks of a ``ResponseBody``.
    public struct AsyncIterator: AsyncIteratorProtocol {
        public typealias Element = Data
        public typealias Failure = RequestError

        let stream: BodyStream
        let operation: RequestOperation
        private let owner: CancelOnDrop
        /// The sequence's own: kept so that dropping the sequence cancels nothing while an
        /// iterator made from it is in use.
        private let sequenceOwner: CancelOnDrop

        fileprivate init(stream: BodyStream, operation: RequestOperation, sequenceOwner: CancelOnDrop) {
            self.stream = stream
            self.operation = operation
            self.owner = CancelOnDrop(operation)
            self.sequenceOwner = sequenceOwner
        }

        /// The next chunk; nil at the end of the body.
        /// - Throws: The ``RequestError`` the transfer failed with, once; nil after it.
        ///   Cancelling the calling task cancels the operation.
        public mutating func next(isolation actor: isolated (any Actor)? = #isolation) async throws(RequestError) -> Data? {
            let result = await withTaskCancellationHandler(operation: { await stream.next() },
                                                           onCancel: { [operation] in operation.cancel() },
                                                           isolation: actor)
            return try result.get()
        }

        /// The next chunk; nil at the end of the body.
        /// - Throws: The ``RequestError`` the transfer failed with, once; nil after it.
        public mutating func next() async throws(RequestError) -> Data? {
            try await next(isolation: nil)
        }
    }
}

extension RequestOperation: Cancellable {}
