import CurlQueue
import Foundation
package import NIOCore
package import NIOHTTP1

/// The JSON document `/echo` answers with:
/// `{"method":…,"uri":…,"headers":[[name,value],…],"bodyLength":n,"body":base64}`.
package enum EchoJSON {
    /// Bodies longer than this are reported by length only (`"body":""`).
    package static let maxEchoedBodyLength = 1 << 20

    package static func render(
        method: String,
        uri: String,
        headers: HTTPHeaders,
        bodyLength: Int,
        body: ByteBuffer?,
        allocator: ByteBufferAllocator
    ) -> ByteBuffer {
        var json = "{\"method\":" + TextEscaping.jsonLiteral(method) + ",\"uri\":" + TextEscaping.jsonLiteral(uri) + ",\"headers\":["
        var first = true
        for (name, value) in headers {
            json += (first ? "[" : ",[") + TextEscaping.jsonLiteral(name) + "," + TextEscaping.jsonLiteral(value) + "]"
            first = false
        }
        let encodedBody: String
        if let body, bodyLength <= maxEchoedBodyLength {
            encodedBody = Data(body.readableBytesView).base64EncodedString()
        } else {
            encodedBody = ""
        }
        json += "],\"bodyLength\":\(bodyLength),\"body\":" + TextEscaping.jsonLiteral(encodedBody) + "}"
        var buffer = allocator.buffer(capacity: json.utf8.count)
        buffer.writeString(json)
        return buffer
    }

}
