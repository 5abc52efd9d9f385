import CurlQueueDemoServer
import NIOCore
import NIOHTTP1

/// Serves the fixture routes on one connection.
///
/// It sits at the end of NIO's standard server pipeline (`configureHTTPServerPipeline`: response
/// encoder, request decoder, pipelining handler, protocol error handler). The pipelining handler
/// holds back a pipelined request until the previous response has ended, so this handler only
/// ever deals with one request at a time.
///
/// Per request: the head is recorded (and counted as in flight) on arrival; the route is chosen
/// when the request has fully arrived; after `delay=MS` the plan is carried out. The request
/// stops being in flight when its response `.end` is written or the connection closes.
///
/// Everything here runs on the channel's event loop. Delayed work (the `delay=` timer, `drip=`
/// ticks, gate openings) carries the ``generation`` it was scheduled for and does nothing if the
/// request it belonged to is over.
final class RouteHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// The request currently being received or answered.
    struct CurrentRequest {
        var head: HTTPRequestHead
        var target: RequestTarget
        var sequence: Int
        var bodyLength = 0
        /// The body so far, kept only for `/echo` and only up to ``EchoJSON/maxEchoedBodyLength``.
        var body: ByteBuffer?
    }

    let state: ServerState
    let connectionID: Int

    /// This handler's context while it is in a pipeline (for callbacks that arrive from elsewhere).
    private var context: ChannelHandlerContext?
    private(set) var request: CurrentRequest?
    private var requestInFlight = false
    /// Bumped whenever a request begins or ends and when the connection closes.
    private(set) var generation = 0
    private var delayTask: Scheduled<Void>?
    private var gateWaiter: (name: String, id: Int)?
    /// Bytes a `/leftover` response left behind, written ahead of the next response.
    private var leftover: ByteBuffer?

    // Streaming state, used by RouteHandler+ByteStreaming.swift.
    var stream: ByteStream?
    var isPumping = false
    var dripTask: Scheduled<Void>?

    init(state: ServerState, connectionID: Int) {
        self.state = state
        self.connectionID = connectionID
    }

    var isHeadRequest: Bool {
        request?.head.method == .HEAD
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            requestHeadArrived(head, context: context)
        case .body(var part):
            guard var request = self.request else { return }
            self.request = nil  // keep the body buffer uniquely referenced while appending
            request.bodyLength += part.readableBytes
            if request.body != nil {
                if request.bodyLength <= EchoJSON.maxEchoedBodyLength {
                    request.body!.writeBuffer(&part)
                } else {
                    request.body = nil
                }
            }
            state.requestBodyProgress(sequence: request.sequence, bodyLength: request.bodyLength)
            self.request = request
        case .end:
            requestEnded(context: context)
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            pumpStream(context: context)
        }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        generation += 1
        delayTask?.cancel()
        delayTask = nil
        dripTask?.cancel()
        dripTask = nil
        stream = nil
        if let gateWaiter {
            state.cancelGateWaiter(name: gateWaiter.name, id: gateWaiter.id)
            self.gateWaiter = nil
        }
        if requestInFlight {
            requestInFlight = false
            state.requestFinished()
        }
        request = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // Read/write failures (the client went away, a reset) and HTTP parse errors (the protocol
        // error handler before us has already answered 400) all end the connection.
        context.close(promise: nil)
    }

    // MARK: Request lifecycle

    private func requestHeadArrived(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        generation += 1
        let target = RequestTarget(uri: head.uri)
        let sequence = state.requestArrived(
            method: head.method.rawValue,
            uri: head.uri,
            path: target.path,
            headers: head.headers.map { RecordedRequest.Header(name: $0.name, value: $0.value) },
            connectionID: connectionID
        )
        requestInFlight = true
        request = CurrentRequest(
            head: head,
            target: target,
            sequence: sequence,
            body: target.path == "/echo" || target.path == "/reflect" ? context.channel.allocator.buffer(capacity: 0) : nil
        )
        if Routes.stallsUpload(path: target.path) {
            context.channel.setOption(ChannelOptions.autoRead, value: false).whenComplete { _ in }
            return
        }
        // Spare clients the wait (curl: one second) before they send an announced body.
        if head.headers["expect"].contains(where: { $0.lowercased() == "100-continue" }) {
            let interim = HTTPResponseHead(version: .http1_1, status: .continue)
            context.writeAndFlush(wrapOutboundOut(.head(interim)), promise: nil)
        }
    }

    private func requestEnded(context: ChannelHandlerContext) {
        guard let request else { return }
        let plan = Routes.plan(
            method: request.head.method,
            target: request.target,
            headers: request.head.headers,
            state: state
        )
        let delay = max(0, request.target.int("delay") ?? 0)
        guard delay > 0 else {
            carryOut(plan, context: context)
            return
        }
        let generation = self.generation
        delayTask = context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(delay))) {
            guard self.generation == generation else { return }
            self.delayTask = nil
            self.carryOut(plan, context: context)
        }
    }

    /// Marks the current request as answered.
    private func requestCompleted() {
        if requestInFlight {
            requestInFlight = false
            state.requestFinished()
        }
        request = nil
        generation += 1
    }

    private func carryOut(_ plan: ResponsePlan, context: ChannelHandlerContext) {
        guard let request else { return }
        if let leftover {
            self.leftover = nil
            writeRaw(leftover, flush: false, context: context)
        }
        switch plan {
        case .fixed(let response):
            sendFixed(response, context: context)
        case .bytes(let bytesPlan):
            startStreaming(bytesPlan, context: context)
        case .echo:
            let body = EchoJSON.render(
                method: request.head.method.rawValue,
                uri: request.head.uri,
                headers: request.head.headers,
                bodyLength: request.bodyLength,
                body: request.body,
                allocator: context.channel.allocator
            )
            sendFixed(FixedResponse(status: .ok, headers: ["Content-Type": "application/json"], body: body), context: context)
        case .reflect(let encoding):
            var headers: HTTPHeaders = ["Content-Type": "application/octet-stream"]
            if let encoding { headers.add(name: "Content-Encoding", value: encoding) }
            let body = request.body ?? context.channel.allocator.buffer(capacity: 0)
            sendFixed(FixedResponse(status: .ok, headers: headers, body: body), context: context)
        case .gate(let name):
            waitForGate(name, context: context)
        case .close:
            context.close(promise: nil)
        case .reset:
            resetConnection(context: context)
        case .raw(let bytes, let reset):
            writeRawThenClose(bytes, reset: reset, context: context)
        case .trickle(let bytes, let interval, let stallAfter):
            trickle(bytes, interval: interval, stallAfter: stallAfter, context: context)
        case .lines(let linesPlan):
            startLines(linesPlan, context: context)
        case .closeOtherConnections:
            let others = state.openConnections(except: connectionID)
            for channel in others {
                channel.close(promise: nil)
            }
            sendFixed(.text(.ok, "closed \(others.count)"), context: context)
        case .leaveBehind(let response, let bytes):
            leftover = bytes
            sendFixed(response, context: context)
        case .withSurplus(let response, let surplus):
            sendWithSurplus(response, surplus: surplus, context: context)
        }
    }

    // MARK: Writing responses

    /// Writes the response head (not flushed), adding `Connection` headers as keep-alive needs.
    func writeHead(status: HTTPResponseStatus, headers: HTTPHeaders, context: ChannelHandlerContext) {
        guard let request else { return }
        var headers = headers
        if !request.head.isKeepAlive {
            headers.replaceOrAdd(name: "Connection", value: "close")
        } else if request.head.version.major == 1, request.head.version.minor == 0 {
            headers.replaceOrAdd(name: "Connection", value: "keep-alive")
        }
        let head = HTTPResponseHead(version: .http1_1, status: status, headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
    }

    /// Writes `.end`, which completes the request, and closes the connection afterwards if asked
    /// to or if the request was not keep-alive.
    func endResponse(context: ChannelHandlerContext, thenClose: Bool = false) {
        let close = thenClose || !(request?.head.isKeepAlive ?? false)
        // Complete first: writing `.end` can synchronously deliver the next pipelined request.
        requestCompleted()
        if close {
            context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
                context.close(promise: nil)
            }
        } else {
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }

    private func sendFixed(_ response: FixedResponse, context: ChannelHandlerContext) {
        var headers = response.headers
        let mayHaveBody = response.status.mayHaveResponseBody
        if mayHaveBody {
            headers.replaceOrAdd(name: "Content-Length", value: String(response.body.readableBytes))
        }
        writeHead(status: response.status, headers: headers, context: context)
        let sendsBody = mayHaveBody && !isHeadRequest
        if let cut = response.closeAfterBytes {
            if sendsBody, cut > 0 {
                let part = response.body.getSlice(at: response.body.readerIndex, length: min(cut, response.body.readableBytes))!
                context.write(wrapOutboundOut(.body(.byteBuffer(part))), promise: nil)
            }
            closeAfterPendingWrites(context: context)
            return
        }
        if sendsBody, response.body.readableBytes > 0 {
            context.write(wrapOutboundOut(.body(.byteBuffer(response.body))), promise: nil)
        }
        endResponse(context: context)
    }

    /// Writes `response` (keep-alive) and `surplus` after its end, flushed together: one
    /// write on the wire, which the client reads with the body.
    private func sendWithSurplus(_ response: FixedResponse, surplus: ByteBuffer, context: ChannelHandlerContext) {
        var headers = response.headers
        headers.replaceOrAdd(name: "Content-Length", value: String(response.body.readableBytes))
        writeHead(status: response.status, headers: headers, context: context)
        if !isHeadRequest { context.write(wrapOutboundOut(.body(.byteBuffer(response.body))), promise: nil) }
        requestCompleted()
        context.write(wrapOutboundOut(.end(nil)), promise: nil)
        if writeRaw(surplus, flush: true, context: context) == nil { context.flush() }
    }

    // MARK: Gates

    private func waitForGate(_ name: String, context: ChannelHandlerContext) {
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let eventLoop = context.eventLoop
        let generation = self.generation
        let waiterID = state.waitForGate(name) {
            eventLoop.execute {
                handler.value.gateOpened(name, generation: generation)
            }
        }
        if let waiterID {
            gateWaiter = (name, waiterID)
        } else {
            sendFixed(.text(.ok, "open \(name)"), context: context)
        }
    }

    /// Pauses a byte stream until gate `name` opens, then lets it go on.
    func waitForStreamGate(_ name: String, context: ChannelHandlerContext) {
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let eventLoop = context.eventLoop
        let generation = self.generation
        let waiterID = state.waitForGate(name) {
            eventLoop.execute {
                handler.value.streamGateOpened(generation: generation)
            }
        }
        if let waiterID {
            gateWaiter = (name, waiterID)
        } else {
            streamGateOpened(generation: generation)
        }
    }

    private func streamGateOpened(generation: Int) {
        guard generation == self.generation, let context, stream != nil else { return }
        gateWaiter = nil
        stream!.hold = nil
        pumpStream(context: context)
    }

    private func gateOpened(_ name: String, generation: Int) {
        guard generation == self.generation, let context else { return }
        gateWaiter = nil
        sendFixed(.text(.ok, "open \(name)"), context: context)
    }
}
