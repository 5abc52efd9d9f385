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
        var json = "{\"method\":" + quoted(method) + ",\"uri\":" + quoted(uri) + ",\"headers\":["
        var first = true
        for (name, value) in headers {
            json += (first ? "[" : ",[") + quoted(name) + "," + quoted(value) + "]"
            first = false
        }
        let encodedBody: String
        if let body, bodyLength <= maxEchoedBodyLength {
            encodedBody = Data(body.readableBytesView).base64EncodedString()
        } else {
            encodedBody = ""
        }
        json += "],\"bodyLength\":\(bodyLength),\"body\":" + quoted(encodedBody) + "}"
        var buffer = allocator.buffer(capacity: json.utf8.count)
        buffer.writeString(json)
        return buffer
    }

    /// `text` as a JSON string literal.
    static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case let control where control.value < 0x20 || control.value == 0x7F:
                let hex = String(control.value, radix: 16)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default:
                result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}
