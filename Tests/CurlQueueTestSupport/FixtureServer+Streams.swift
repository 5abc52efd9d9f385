import CurlQueueDemoServer
import NIOCore
import NIOHTTP1

/// `/lines`: a chunked NDJSON response written one line per write, for streamed bodies.
///
/// `GET /lines?count=N` sends `{"n":0}\n` … `{"n":N-1}\n`, each its own chunk, then ends.
/// Options:
/// - `gate=NAME`: line `i` waits for gate `NAME-i` (``FixtureServer/openGate(_:)``), so a test
///   releases lines one at a time;
/// - `interval=MS`: one line every MS milliseconds (without a gate);
/// - no `count` (or `heartbeat=1`): lines without end — a heartbeat (every 20 ms unless
///   `interval=` says otherwise) that runs until the client closes the connection;
/// - `pad=K`: each line is padded to at least K bytes (`{"n":i,"pad":"xxx…"}\n`);
/// - `thenClose=1`: after the last line the connection is closed without the terminating chunk
///   (a transfer that fails midway);
/// - `id=ID`: when the connection closes, gate `ID.closed` opens (see
///   ``FixtureServer/waitUntilClosed(_:)``).
struct LinesPlan {
    var count: Int?
    var gate: String?
    var interval: Int?
    var pad: Int
    var thenClose: Bool
    var id: String?
}

extension Routes {
    static func lines(target: RequestTarget) -> ResponsePlan {
        let heartbeat = target.flag("heartbeat") || target.query["count"] == nil
        return .lines(LinesPlan(
            count: heartbeat ? nil : max(0, target.int("count") ?? 0),
            gate: target.query["gate"],
            interval: target.int("interval").map { max(0, $0) } ?? (heartbeat ? 20 : nil),
            pad: max(0, target.int("pad") ?? 0),
            thenClose: target.flag("thenClose"),
            id: target.query["id"]))
    }

    /// Line `index` of a `/lines` body.
    static func line(_ index: Int, pad: Int) -> String {
        let plain = "{\"n\":\(index)}\n"
        guard plain.utf8.count < pad else { return plain }
        let filler = max(0, pad - plain.utf8.count - 9)  // `,"pad":""` is 9 bytes
        return "{\"n\":\(index),\"pad\":\"" + String(repeating: "x", count: filler) + "\"}\n"
    }
}

extension FixtureServer {
    /// Returns once the connection of the `/lines?…&id=ID` response has closed (at once if it
    /// has already). It never returns if that connection stays open: bound it with a timeout.
    public func waitUntilClosed(_ id: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            if state.waitForGate("\(id).closed", onOpen: { continuation.resume() }) == nil {
                continuation.resume()
            }
        }
    }
}

extension RouteHandler {
    func startLines(_ plan: LinesPlan, context: ChannelHandlerContext) {
        writeHead(status: .ok, headers: ["Content-Type": "application/x-ndjson", "Transfer-Encoding": "chunked"],
                  context: context)
        context.flush()
        if let id = plan.id {
            let state = self.state
            context.channel.closeFuture.whenComplete { _ in state.openGate("\(id).closed") }
        }
        sendLines(from: 0, plan, generation: generation, context: context)
    }

    /// Writes lines from `index` on, as far as no gate or interval holds them back.
    private func sendLines(from index: Int, _ plan: LinesPlan, generation: Int, context: ChannelHandlerContext) {
        var index = index
        while generation == self.generation, context.channel.isActive {
            if let count = plan.count, index >= count {
                if plan.thenClose {
                    closeAfterPendingWrites(context: context)
                } else {
                    endResponse(context: context)
                }
                return
            }
            let next = index
            let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
            let boundContext = NIOLoopBound(context, eventLoop: context.eventLoop)
            let eventLoop = context.eventLoop
            let send: @Sendable () -> Void = {
                eventLoop.execute {
                    handler.value.writeLine(next, plan, generation: generation, context: boundContext.value)
                }
            }
            if let gate = plan.gate {
                if state.waitForGate("\(gate)-\(index)", onOpen: send) != nil { return }
            } else if let interval = plan.interval, interval > 0 {
                eventLoop.scheduleTask(in: .milliseconds(Int64(interval))) { send() }
                return
            }
            guard writeOne(index, plan, context: context) else { return }
            index += 1
        }
    }

    private func writeLine(_ index: Int, _ plan: LinesPlan, generation: Int, context: ChannelHandlerContext) {
        guard generation == self.generation, context.channel.isActive else { return }
        guard writeOne(index, plan, context: context) else { return }
        sendLines(from: index + 1, plan, generation: generation, context: context)
    }

    /// Writes and flushes one line; false when the channel is gone.
    private func writeOne(_ index: Int, _ plan: LinesPlan, context: ChannelHandlerContext) -> Bool {
        guard context.channel.isActive else { return false }
        let text = Routes.line(index, pad: plan.pad)
        var buffer = context.channel.allocator.buffer(capacity: text.utf8.count)
        buffer.writeString(text)
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        return true
    }
}
