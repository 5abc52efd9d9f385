public import Foundation

/// A request body produced while it is sent: the chunks of an async sequence, sent as they come,
/// for ``Request/Body/stream(_:)``.
///
/// ```swift
/// let body = RequestBodyStream(length: nil, events.map { Data($0.json.utf8) })  // chunked
/// let request = Request(url: url, method: .post, body: .stream(body))
/// ```
///
/// Contracts:
/// - **Who iterates it.** CurlQueue iterates the sequence once, in a task of its own (not the
///   caller's: no task-local values, default priority), started when the operation's first
///   attempt is configured — not while it waits in a queue. An operation that ends before that
///   never iterates it. The sequence is never touched on the engine thread.
/// - **Backpressure.** Chunks are buffered until libcurl sends them, at most about 1 MiB (a
///   larger chunk is taken alone into an empty buffer): the iterating task then waits, suspended,
///   for libcurl to take bytes before it asks the sequence for the next chunk. A transfer that
///   has sent everything buffered pauses (`CURL_READFUNC_PAUSE`) until the next chunk arrives;
///   the engine unpauses it on its own thread. The time a transfer waits for the producer does
///   not count for ``Request/Timeouts/idle``; it counts for ``Request/Timeouts/total``.
/// - **Framing.** A known `length` is sent as `Content-Length`, and a sequence that ends before
///   or runs past it fails the operation with ``RequestError/invalidRequest(_:)``; with `nil` the
///   body is sent chunked on HTTP/1.1 (`Transfer-Encoding: chunked`) and in DATA frames on HTTP/2.
/// - **Sent once.** A stream belongs to the first operation that sends it; another operation
///   with the same request fails with ``RequestError/invalidRequest(_:)``. Once libcurl has taken
///   a byte, the body cannot be sent again: a retry (``RequestOperation/autoRetry``) or a 307/308
///   redirect, which needs the whole body, fails the operation with
///   ``RequestError/invalidRequest(_:)`` saying so (with what ended the attempt). Before the first
///   byte is taken they go on as for any body. 301, 302 and 303 turn a POST into a GET with no body.
/// - **Cancel and end.** When the operation ends — cancelled (``RequestOperation/cancel()``, or
///   the task awaiting it), failed, or answered before the body's end — the buffered bytes are
///   dropped, a wait for room ends, and the iterating task is cancelled: a sequence that honours
///   cancellation ends its iteration; a chunk it still hands over is dropped, and no further one
///   is asked for.
/// - **Failure.** A sequence that throws fails the operation with ``RequestError/transport(_:)``
///   of code ``CurlCode/readError`` whose message names the error; the error itself is
///   ``producerError``.
///
/// Equal to itself only: two requests holding one stream are equal (a queue that does not allow
/// duplicates cancels the earlier one).
public final class RequestBodyStream: Hashable, Sendable, CustomStringConvertible {
    let channel: UploadChannel

    /// The body's length in bytes, sent as `Content-Length`, or nil for one sent chunked.
    public var length: Int64? { channel.length }

    /// A body of the chunks of `chunks`, in order (empty chunks are skipped).
    /// - Parameter length: The total the chunks add up to, when known; nil to send the body
    ///   chunked.
    public init<Chunks: AsyncSequence & Sendable>(length: Int64? = nil, _ chunks: Chunks) where Chunks.Element: DataProtocol {
        channel = UploadChannel(length: length.map { max(0, $0) }, produce: Self.iteration(of: chunks))
    }

    /// For the tests: a body buffered up to `limit` bytes, a waiting producer let in at `lowWater`.
    init<Chunks: AsyncSequence & Sendable>(length: Int64?, limit: Int, lowWater: Int, _ chunks: Chunks) where Chunks.Element: DataProtocol {
        channel = UploadChannel(length: length, limit: limit, lowWater: lowWater, produce: Self.iteration(of: chunks))
    }

    /// The producer's loop: each chunk copied and handed over, until the end or a refusal.
    private static func iteration<Chunks: AsyncSequence & Sendable>(of chunks: Chunks) -> UploadChannel.Produce where Chunks.Element: DataProtocol {
        { channel in
            for try await chunk in chunks where !chunk.isEmpty {
                guard await channel.write(Data(chunk)) else { return false }
            }
            return true
        }
    }

    /// The error the sequence threw, once it did; nil otherwise (also when the operation ended
    /// first and its cancel made the sequence throw).
    public var producerError: (any Error)? { channel.producerError }

    /// Bytes libcurl has taken from the body so far, over every attempt.
    public var bytesSent: Int64 { channel.bytesTaken }

    /// Identity.
    public static func == (lhs: RequestBodyStream, rhs: RequestBodyStream) -> Bool { lhs === rhs }

    /// Hashes the identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    /// `RequestBodyStream(length: N)` or `(chunked)`.
    public var description: String { "RequestBodyStream(\(length.map { "length: \($0)" } ?? "chunked"))" }
}
