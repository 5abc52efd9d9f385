import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket

/// The HTTP server inside `curlq daemon`: HTTP/1.1 with keep-alive, a WebSocket upgrade at
/// `/jsonrpc`, every request checked by ``RPCAccess`` first and its body bounded. The routes
/// and the WebSocket's messages run on Swift tasks, never on the event loop.
final class RPCServer: Sendable {
    struct Limits: Sendable {
        /// The largest request body (HTTP) or message (WebSocket) read, in bytes.
        var maxBody = 1 << 20
    }

    /// What a WebSocket connection does with each text message: the reply to send, if any.
    typealias MessageHandler = @Sendable ([UInt8]) async -> [UInt8]?

    let port: Int
    private let channel: any Channel
    let sockets: WebSocketClients

    private init(port: Int, channel: any Channel, sockets: WebSocketClients) {
        self.port = port
        self.channel = channel
        self.sockets = sockets
    }

    /// Listens on `host`:`port` (0: any free port; ``port`` tells which).
    static func start(host: String, port: Int, routes: RPCRoutes, access: RPCAccess, limits: Limits = .init(),
                      clients sockets: WebSocketClients, webSocket: @escaping MessageHandler) async throws -> RPCServer {
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                let upgrader = NIOWebSocketServerUpgrader(
                    maxFrameSize: limits.maxBody,
                    shouldUpgrade: { channel, head in
                        // Only where a route answers /jsonrpc: not on `--metrics-listen`'s server.
                        let allowed = head.uri.split(separator: "?", maxSplits: 1).first == "/jsonrpc" && routes.knows("/jsonrpc")
                            && access.refusal(head.headers) == nil
                        return channel.eventLoop.makeSucceededFuture(allowed ? HTTPHeaders() : nil)
                    },
                    upgradePipelineHandler: { channel, _ in
                        channel.eventLoop.makeCompletedFuture {
                            try channel.pipeline.syncOperations.addHandler(
                                WebSocketHandler(limit: limits.maxBody, handler: webSocket, clients: sockets))
                        }
                    })
                return channel.eventLoop.makeCompletedFuture {
                    let upgrade: NIOHTTPServerUpgradeSendableConfiguration = (
                        upgraders: [upgrader],
                        completionHandler: { context in
                            context.pipeline.syncOperations.removeHandler(name: "rpc-http", promise: nil)
                        })
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                        withServerUpgrade: upgrade, withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(
                        HTTPHandler(routes: routes, access: access, limit: limits.maxBody), name: "rpc-http")
                }
            }
        let channel = try await bootstrap.bind(host: host, port: port).get()
        guard let bound = channel.localAddress?.port else {
            try? await channel.close()
            throw ChannelError.unknownLocalAddress
        }
        return RPCServer(port: bound, channel: channel, sockets: sockets)
    }

    /// Stops listening and closes every WebSocket.
    func stop() async {
        try? await channel.close()
        sockets.closeAll()
    }
}

/// Reads one HTTP request at a time (NIO's pipelining handler holds the next until this one's
/// response ends), checks it, and answers from the routes.
private final class HTTPHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let routes: RPCRoutes
    private let access: RPCAccess
    private let limit: Int
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    /// Set once the request was answered early (too large, refused): its rest is dropped.
    private var answered = false

    init(routes: RPCRoutes, access: RPCAccess, limit: Int) {
        self.routes = routes
        self.access = access
        self.limit = limit
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = []
            answered = false
            if let refusal = access.refusal(head.headers) {
                answer(context, .text(.forbidden, "forbidden: \(refusal)"), keepAlive: false)
            } else if let length = head.headers["Content-Length"].first.flatMap(Int.init), length > limit {
                answer(context, .text(.payloadTooLarge, "the body is over \(limit) bytes"), keepAlive: false)
            }
        case .body(var buffer):
            guard !answered else { return }
            if body.count + buffer.readableBytes > limit {
                answer(context, .text(.payloadTooLarge, "the body is over \(limit) bytes"), keepAlive: false)
                return
            }
            body += buffer.readBytes(length: buffer.readableBytes) ?? []
        case .end:
            guard !answered, let head else { return }
            answered = true
            let (path, query) = Self.split(head.uri)
            let request = RPCHTTPRequest(method: head.method, path: path, query: query, headers: head.headers, body: body)
            body = []
            let keepAlive = head.isKeepAlive
            let routes = self.routes
            let promise = context.eventLoop.makePromise(of: RPCHTTPResponse.self)
            promise.completeWithTask { await routes.respond(to: request) }
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            promise.futureResult.whenSuccess { response in
                let (handler, context) = bound.value
                handler.write(context, response, keepAlive: keepAlive && !response.close)
            }
        }
    }

    /// Answers before the request's end (a refusal): the connection closes after it.
    private func answer(_ context: ChannelHandlerContext, _ response: RPCHTTPResponse, keepAlive: Bool) {
        answered = true
        write(context, response, keepAlive: keepAlive)
    }

    private func write(_ context: ChannelHandlerContext, _ response: RPCHTTPResponse, keepAlive: Bool) {
        var headers = HTTPHeaders(response.headers)
        headers.replaceOrAdd(name: "Content-Length", value: String(response.body.count))
        headers.replaceOrAdd(name: "Cache-Control", value: "no-cache")
        headers.replaceOrAdd(name: "X-Content-Type-Options", value: "nosniff")
        if !keepAlive { headers.replaceOrAdd(name: "Connection", value: "close") }
        if access.allowsAnyOrigin { headers.replaceOrAdd(name: "Access-Control-Allow-Origin", value: "*") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: response.status, headers: headers))), promise: nil)
        if !response.body.isEmpty {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: response.body)))), promise: nil)
        }
        let done = context.writeAndFlushPromise()
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: done)
        if !keepAlive {
            let channel = context.channel
            done.futureResult.whenComplete { _ in channel.close(promise: nil) }
        }
    }

    static func split(_ uri: String) -> (path: String, query: String?) {
        guard let mark = uri.firstIndex(of: "?") else { return (uri, nil) }
        return (String(uri[..<mark]), String(uri[uri.index(after: mark)...]))
    }
}

extension ChannelHandlerContext {
    fileprivate func writeAndFlushPromise() -> EventLoopPromise<Void> { eventLoop.makePromise() }
}

/// The open WebSockets, for notifications to all of them.
final class WebSocketClients: Sendable {
    private let channels = NIOLockedValueBox<[ObjectIdentifier: any Channel]>([:])

    fileprivate func add(_ channel: any Channel) { channels.withLockedValue { $0[ObjectIdentifier(channel)] = channel } }
    fileprivate func remove(_ channel: any Channel) { _ = channels.withLockedValue { $0.removeValue(forKey: ObjectIdentifier(channel)) } }

    var count: Int { channels.withLockedValue { $0.count } }

    /// Sends `text` to every open WebSocket, as one text frame each.
    func broadcast(_ text: String) {
        for channel in channels.withLockedValue({ Array($0.values) }) {
            let frame = WebSocketFrame(fin: true, opcode: .text, data: channel.allocator.buffer(string: text))
            channel.writeAndFlush(frame, promise: nil)
        }
    }

    func closeAll() {
        for channel in channels.withLockedValue({ Array($0.values) }) { channel.close(promise: nil) }
    }
}

/// One WebSocket at `/jsonrpc`: text messages (fragments joined, bounded) go to the handler,
/// whose reply goes back as one text frame; pings are answered; a close is echoed.
private final class WebSocketHandler: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let limit: Int
    private let handler: RPCServer.MessageHandler
    private let clients: WebSocketClients
    private var message: [UInt8] = []
    private var inMessage = false

    init(limit: Int, handler: @escaping RPCServer.MessageHandler, clients: WebSocketClients) {
        self.limit = limit
        self.handler = handler
        self.clients = clients
    }

    func handlerAdded(context: ChannelHandlerContext) { clients.add(context.channel) }
    func handlerRemoved(context: ChannelHandlerContext) { clients.remove(context.channel) }
    func channelInactive(context: ChannelHandlerContext) {
        clients.remove(context.channel)
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text, .binary, .continuation:
            if frame.opcode != .continuation { message = []; inMessage = true }
            guard inMessage else { return close(context, code: .protocolError) }
            var data = frame.unmaskedData
            guard message.count + data.readableBytes <= limit else { return close(context, code: .messageTooLarge) }
            message += data.readBytes(length: data.readableBytes) ?? []
            guard frame.fin else { return }
            inMessage = false
            let bytes = message
            message = []
            let handler = self.handler
            let channel = context.channel
            Task {
                guard let reply = await handler(bytes) else { return }
                let frame = WebSocketFrame(fin: true, opcode: .text, data: channel.allocator.buffer(bytes: reply))
                channel.writeAndFlush(frame, promise: nil)
            }
        case .ping:
            let pong = WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
        case .connectionClose:
            var data = frame.unmaskedData
            let code = data.readSlice(length: 2) ?? context.channel.allocator.buffer(capacity: 0)
            let reply = WebSocketFrame(fin: true, opcode: .connectionClose, data: code)
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(reply)).whenComplete { _ in channel.close(promise: nil) }
        default:
            break
        }
    }

    private func close(_ context: ChannelHandlerContext, code: WebSocketErrorCode) {
        var data = context.channel.allocator.buffer(capacity: 2)
        data.write(webSocketErrorCode: code)
        let frame = WebSocketFrame(fin: true, opcode: .connectionClose, data: data)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(frame)).whenComplete { _ in channel.close(promise: nil) }
    }
}
