import NIOCore
import NIOHTTP1

extension FixtureServer {
    /// Writes surplus bytes as they are (below the HTTP encoder) on an open connection, as a
    /// server that sent more than its last response announced, some time after that response:
    /// with `kind` `response`, a complete, well-formed response whose body is `EVIL`;
    /// otherwise the bare text `EVIL`.
    /// Returns once the bytes were handed to the kernel: on the loopback interface they are then
    /// waiting in the client's socket. False if the connection is not open (or closed before the
    /// bytes went out).
    public func writeSurplus(_ kind: String?, onConnection id: Int) async -> Bool {
        guard let channel = state.mutex.withLockedValue({ $0.openChannels[id] }) else { return false }
        let text = Routes.surplus(kind: kind)
        let written: EventLoopFuture<Void> = channel.eventLoop.flatSubmit {
            guard let encoder = try? channel.pipeline.syncOperations.context(handlerType: HTTPResponseEncoder.self) else {
                return channel.eventLoop.makeFailedFuture(ChannelError.ioOnClosedChannel)
            }
            return encoder.writeAndFlush(NIOAny(IOData.byteBuffer(ByteBuffer(string: text))))
        }
        do {
            try await written.get()
            return true
        } catch {
            return false  // closed meanwhile
        }
    }
}
