import NIOCore
import NIOHTTP1

/// Servers that stall or trickle where the `/bytes` options cannot: in the middle of the
/// response head, and while the request body is still coming.
extension RouteHandler {
    /// `/trickle-head?interval=MS&stallAfter=K`: a head (`200`, eight filler fields, a 2-byte
    /// body `ok`) written one byte per `interval` (default 100 ms) below the HTTP encoder, the
    /// first at once; `lines=1`: one line of it per `interval` instead. With `stallAfter=K`,
    /// nothing more after K bytes (or lines), the connection kept open. The connection closes
    /// after the body.
    func trickle(_ units: [ByteBuffer], interval: TimeAmount, stallAfter: Int?, context: ChannelHandlerContext) {
        let generation = self.generation
        let limit = min(stallAfter ?? .max, units.count)
        func send(_ index: Int) {
            guard self.generation == generation, context.channel.isActive else { return }
            guard index < limit else {
                if index == units.count { context.close(promise: nil) }
                return  // a stall: the connection stays open until the client closes it
            }
            writeRaw(units[index], flush: true, context: context)
            state.mutex.withLockedValue { $0.trickleWrites.append(.now) }
            context.eventLoop.assumeIsolated().scheduleTask(in: interval) { send(index + 1) }
        }
        send(0)
    }

    /// What `/trickle-head` writes, a byte or a line (CRLF included) at a time.
    static func trickledResponse(byLine: Bool) -> [ByteBuffer] {
        let fields = (1...8).map { "X-Fill-\($0): \(String(repeating: "x", count: 16))\r\n" }.joined()
        let text = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n" + fields + "\r\n"
        let units = byLine ? text.components(separatedBy: "\r\n").dropLast().map { $0 + "\r\n" } : text.map(String.init)
        return units.map { ByteBuffer(string: $0) } + [ByteBuffer(string: "ok")]
    }
}

extension Routes {
    /// The head of a `/stall-upload` request: the server stops reading from the connection, so
    /// the client's request body stalls once the socket buffers are full. Never answered.
    static func stallsUpload(path: String) -> Bool { path == "/stall-upload" }
}
