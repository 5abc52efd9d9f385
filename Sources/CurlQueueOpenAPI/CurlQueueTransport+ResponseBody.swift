import CurlQueue
import Foundation
import HTTPTypes
import OpenAPIRuntime

extension CurlQueueTransport {
    /// The body of `response` as an `HTTPBody` iterable once, its length from `Content-Length`;
    /// `nil` for a response that has none (a HEAD's, 204, 304). An empty body is read to its end
    /// here: dropping it unread would cancel the operation and close a connection worth keeping.
    static func responseBody(_ response: StreamingResponse, method: HTTPRequest.Method) async throws -> HTTPBody? {
        let status = response.status.code
        var length = HTTPBody.Length.unknown
        if let field = response.headerFields[.contentLength], let count = Int64(field) { length = .known(count) }
        let hasNoBody = method == .head || status == 204 || status == 304
        if hasNoBody || length == .known(0) {
            for try await _ in response.body {}
            return hasNoBody ? nil : HTTPBody()
        }
        return HTTPBody(ResponseBytes(body: response.body), length: length, iterationBehavior: .single)
    }
}

/// The chunks of a ``ResponseBody`` as the byte chunks `HTTPBody` carries (a copy per chunk).
/// Ending the iteration early, or dropping it, cancels the operation as ``ResponseBody`` does.
struct ResponseBytes: AsyncSequence, Sendable {
    typealias Element = ArraySlice<UInt8>
    let body: ResponseBody

    func makeAsyncIterator() -> Iterator { Iterator(base: body.makeAsyncIterator()) }

    struct Iterator: AsyncIteratorProtocol {
        var base: ResponseBody.AsyncIterator

        mutating func next() async throws -> ArraySlice<UInt8>? {
            guard let chunk = try await base.next() else { return nil }
            return ArraySlice(chunk)
        }
    }
}
