import CurlQueueDemoServer
import NIOCore
import NIOHTTP1

extension Routes {
    /// `/json?body=TEXT`: `200` with TEXT (percent-decoded) as the body, labelled
    /// `application/json` unless `type=` names another content type; `status=N` for another status.
    static func json(target: RequestTarget) -> FixedResponse {
        let code = target.int("status").flatMap { (200...999).contains($0) ? $0 : nil } ?? 200
        return FixedResponse(
            status: HTTPResponseStatus(statusCode: code),
            headers: ["Content-Type": target.query["type"] ?? "application/json"],
            body: ByteBuffer(string: target.query["body"] ?? "")
        )
    }
}
