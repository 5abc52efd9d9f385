import CurlQueue
import Foundation
import OpenAPIRuntime

extension CurlQueueTransport {
    /// What the request sends for `body`: nothing for none; the bytes, read into memory first,
    /// for a body of known length up to `memoryLimit` (so that retries and 307/308 redirects can
    /// send it again); every other body streamed as the `HTTPBody` yields it, iterated once by
    /// the operation (``RequestBodyStream``), which is returned too for its error.
    static func requestBody(_ body: HTTPBody?, memoryLimit: Int) async throws -> (Request.Body?, RequestBodyStream?) {
        guard let body else { return (nil, nil) }
        switch body.length {
        case .known(let length) where length <= Int64(memoryLimit):
            return (.bytes(try await Data(collecting: body, upTo: Int(max(0, length)))), nil)
        case .known(let length):
            let stream = RequestBodyStream(length: length, body)
            return (.stream(stream), stream)
        case .unknown:
            let stream = RequestBodyStream(length: nil, body)
            return (.stream(stream), stream)
        }
    }
}
