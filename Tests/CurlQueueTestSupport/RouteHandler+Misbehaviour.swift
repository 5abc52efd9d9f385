import NIOCore
import NIOHTTP1

/// Ways of ending a connection badly: cutting a response off, resetting, and writing bytes that
/// are not HTTP at all.
extension RouteHandler {
    /// Closes the connection once everything written so far has reached the socket, without
    /// ending the response. (A plain `close` would discard writes still queued by backpressure.)
    func closeAfterPendingWrites(context: ChannelHandlerContext) {
        if isHeadRequest {
            // A HEAD response has no body to cut short; end it and close.
            endResponse(context: context, thenClose: true)
            return
        }
        // An empty body part adds nothing to the wire (even when chunked) but its promise
        // completes after all earlier writes.
        let marker = context.channel.allocator.buffer(capacity: 0)
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(marker)))).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }

    /// Aborts the connection with a TCP RST once everything written so far has been handed to
    /// the socket, without ending the response.
    func resetAfterPendingWrites(context: ChannelHandlerContext) {
        let marker = context.channel.allocator.buffer(capacity: 0)
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(marker)))).assumeIsolated().whenComplete { _ in
            self.resetConnection(context: context)
        }
    }

    /// Aborts the connection with a TCP RST: `SO_LINGER` `{on, 0 s}` makes `close` discard
    /// unsent data and reset instead of shutting down gracefully.
    func resetConnection(context: ChannelHandlerContext) {
        guard let socket = context.channel as? any SocketOptionProvider else {
            context.close(promise: nil)
            return
        }
        socket.setSoLinger(NIOLinger(l_onoff: 1, l_linger: 0)).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }

    /// Writes `bytes` as they are and then closes the connection (with a RST if `reset`).
    func writeRawThenClose(_ bytes: ByteBuffer, reset: Bool, context: ChannelHandlerContext) {
        guard let written = writeRaw(bytes, flush: true, context: context) else {
            context.close(promise: nil)
            return
        }
        written.assumeIsolated().whenComplete { _ in
            if reset {
                self.resetConnection(context: context)
            } else {
                context.close(promise: nil)
            }
        }
    }

    /// Writes `bytes` as they are, ahead of anything written after them; nil if the pipeline
    /// has no HTTP encoder.
    ///
    /// The bytes are written from the `HTTPResponseEncoder`'s context, so they enter the pipeline
    /// below the encoder (and below the pipelining handler, which only ever sees HTTP parts) and
    /// reach the socket untouched.
    @discardableResult
    func writeRaw(_ bytes: ByteBuffer, flush: Bool, context: ChannelHandlerContext) -> EventLoopFuture<Void>? {
        guard let encoderContext = try? context.pipeline.syncOperations.context(handlerType: HTTPResponseEncoder.self) else {
            return nil
        }
        let data = NIOAny(IOData.byteBuffer(bytes))
        return flush ? encoderContext.writeAndFlush(data) : encoderContext.write(data)
    }
}
