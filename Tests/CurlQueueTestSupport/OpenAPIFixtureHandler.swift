import CurlQueueDemoServer
import Foundation
import NIOCore
import NIOHTTP1

/// Serves ``OpenAPIFixtureServer``'s operations on one connection (after NIO's HTTP/1.1 server
/// pipeline, so one request at a time). Runs on the channel's event loop.
final class OpenAPIFixtureHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// A body being written: a download's pattern bytes or an event stream's lines.
    private enum Writing {
        case download(id: String, next: Int, size: Int)
        case events(id: String, next: Int, count: Int)
        /// `X-Request-Tag: hold`: no answer until the client closes the connection.
        case held
    }

    let state: OpenAPIFixtureState
    let connectionID: Int
    private var head: HTTPRequestHead?
    private var body = ByteBuffer()
    private var pieces = 0
    private var bodyBytes = 0
    private var checksum: Int64 = 0
    private var uploadName: String?
    private var writing: Writing?
    private var isPumping = false
    /// An upload's body is arriving (its head came, its end not yet).
    private var uploadInProgress = false
    /// `holdAfter=`: stop reading once this many body bytes arrived (once per request).
    private var holdAfter: Int?

    init(state: OpenAPIFixtureState, connectionID: Int) {
        self.state = state
        self.connectionID = connectionID
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body.clear()
            pieces = 0
            bodyBytes = 0
            checksum = 0
            let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
            uploadName = head.method == .PUT && path.hasPrefix("/blobs/") ? String(path.dropFirst("/blobs/".count)) : nil
            if let name = uploadName { uploadHeadArrived(head, name: name) }
        case .body(let part):
            let offset = bodyBytes
            pieces += 1
            bodyBytes += part.readableBytes
            if let name = uploadName {
                var mismatch: Int?
                part.withUnsafeReadableBytes { bytes in
                    for byte in bytes { checksum &+= Int64(byte) }
                    let expected = Pattern.slice(offset: offset, count: bytes.count)
                    expected.withUnsafeReadableBytes { pattern in
                        if memcmp(bytes.baseAddress!, pattern.baseAddress!, bytes.count) != 0 {
                            mismatch = offset + zip(bytes, pattern).prefix { $0 == $1 }.count
                        }
                    }
                }
                let (count, reads) = (bodyBytes, pieces)
                state.record {
                    $0.uploads[name]?.bytes = count
                    $0.uploads[name]?.pieces = reads
                    if $0.uploads[name]?.mismatchAt == nil { $0.uploads[name]?.mismatchAt = mismatch }
                }
                if let limit = holdAfter, count >= limit {
                    holdAfter = nil
                    hold(name, context: context)
                }
            } else if body.readableBytes < 1 << 20 {
                var part = part
                body.writeBuffer(&part)
            }
        case .end:
            guard let head else { return }
            self.head = nil
            uploadInProgress = false
            if let name = uploadName { state.record { $0.uploads[name]?.complete = true } }
            state.record { $0.requests += 1 }
            route(head, context: context)
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { pump(context: context) }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        if uploadInProgress, let name = uploadName {
            uploadInProgress = false
            state.record { $0.uploads[name]?.closedEarly = true }
        }
        switch writing {
        case .download(let id, _, _): state.record { $0.downloads[id]?.closedEarly = true }
        case .events(let id, _, _): state.record { $0.events[id]?.closedEarly = true }
        case .held: state.record { $0.heldClosed += 1 }
        case nil: break
        }
        writing = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    // MARK: Uploads

    /// Records an upload's head.
    private func uploadHeadArrived(_ head: HTTPRequestHead, name: String) {
        uploadInProgress = true
        var query: [String: String] = [:]
        for item in URLComponents(string: head.uri)?.queryItems ?? [] { query[item.name] = item.value ?? "" }
        holdAfter = query["holdAfter"].flatMap(Int.init)
        let length = head.headers.first(name: "Content-Length").flatMap(Int.init)
        let chunked = head.headers["Transfer-Encoding"].contains { $0.lowercased().contains("chunked") }
        state.record {
            $0.uploads[name] = .init(contentLength: length, chunked: chunked, requests: ($0.uploads[name]?.requests ?? 0) + 1)
        }
    }

    /// Stops reading the connection until gate `NAME-hold` opens.
    private func hold(_ name: String, context: ChannelHandlerContext) {
        state.record { $0.uploads[name]?.held = true }
        context.channel.setOption(ChannelOptions.autoRead, value: false).whenComplete { _ in }
        let loop = context.eventLoop
        let boundContext = NIOLoopBound(context, eventLoop: loop)
        state.whenOpen("\(name)-hold") { [state] in
            loop.execute {
                state.record { $0.uploads[name]?.held = false }
                boundContext.value.channel.setOption(ChannelOptions.autoRead, value: true).whenComplete { _ in }
                boundContext.value.read()
            }
        }
    }

    // MARK: Routes

    private func route(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        let components = URLComponents(string: head.uri)
        let path = components?.path ?? head.uri
        var query: [String: String] = [:]
        for item in components?.queryItems ?? [] { query[item.name] = item.value ?? "" }
        let segments = path.split(separator: "/").map(String.init)

        switch (head.method, segments.first, segments.count) {
        case (.GET, "items", 2):
            guard let id = Int64(segments[1]) else { return json(.badRequest, ["message": "bad id"], context) }
            if id >= 1000 { return json(.notFound, ["message": "no item \(id)"], context) }
            if head.headers.first(name: "X-Request-Tag") == "hold" {
                writing = .held
                return state.record { $0.held += 1 }
            }
            var item: [String: Any] = ["id": id, "name": "item \(id)"]
            if let tag = head.headers.first(name: "X-Request-Tag") { item["tag"] = tag }
            if let verbose = query["verbose"] { item["verbose"] = verbose == "true" }
            json(.ok, item, context)
        case (.POST, "items", 1):
            let object = body.readableBytesView.isEmpty ? nil
                : try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]
            guard let name = object?["name"] as? String else { return json(.badRequest, ["message": "no name"], context) }
            json(.created, ["id": 1, "name": name], context)
        case (.PUT, "blobs", 2):
            let status = query["status"].flatMap(Int.init).map { HTTPResponseStatus(statusCode: $0) } ?? .ok
            json(status, ["bytes": bodyBytes, "pieces": pieces, "checksum": checksum], context,
                 location: (300..<400).contains(status.code) ? "/blobs/\(segments[1])-next" : nil)
        case (.GET, "download", 1):
            guard let size = query["size"].flatMap(Int.init), size >= 0 else {
                return json(.badRequest, ["message": "bad size"], context)
            }
            let id = query["id"] ?? ""
            if !id.isEmpty { state.record { $0.downloads[id] = .init(size: size) } }
            var headers = HTTPHeaders([("Content-Type", "application/octet-stream"), ("Content-Length", "\(size)")])
            headers.add(name: "Connection", value: "keep-alive")
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
            writing = .download(id: id, next: 0, size: size)
            pump(context: context)
        case (.GET, "events", 1):
            guard let count = query["count"].flatMap(Int.init), let id = query["id"] else {
                return json(.badRequest, ["message": "count and id"], context)
            }
            state.record { $0.events[id] = .init() }
            let headers = HTTPHeaders([("Content-Type", "application/jsonl"), ("Transfer-Encoding", "chunked")])
            context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
            writing = .events(id: id, next: 0, count: count)
            nextEvent(context: context)
        default:
            json(.notFound, ["message": "no route \(head.method) \(path)"], context)
        }
    }

    private func json(_ status: HTTPResponseStatus, _ object: [String: Any], _ context: ChannelHandlerContext,
                      location: String? = nil) {
        let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        var headers = HTTPHeaders([("Content-Type", "application/json"), ("Content-Length", "\(data.count)")])
        if let location { headers.add(name: "Location", value: location) }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: data)))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    /// Writes download bytes while the channel takes them (its buffer under the high-water mark);
    /// resumed by `channelWritabilityChanged`. Each stop for a full channel counts as a pause. A
    /// flush can report writability at once, calling this again: `isPumping` makes that a no-op
    /// and the loop goes on itself.
    private func pump(context: ChannelHandlerContext) {
        guard !isPumping else { return }
        isPumping = true
        defer { isPumping = false }
        while case .download(let id, let next, let size) = writing {
            if next == size {
                writing = nil
                if !id.isEmpty { state.record { $0.downloads[id]?.written = size; $0.downloads[id]?.finished = true } }
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
                return
            }
            guard context.channel.isActive else { return }
            guard context.channel.isWritable else {
                if !id.isEmpty { state.record { $0.downloads[id]?.written = next; $0.downloads[id]?.pauses += 1 } }
                return
            }
            var position = next
            while position < size && context.channel.isWritable {
                let count = min(64 * 1024, size - position)
                context.write(wrapOutboundOut(.body(.byteBuffer(Pattern.slice(offset: position, count: count)))), promise: nil)
                position += count
            }
            writing = .download(id: id, next: position, size: size)
            context.flush()  // may make the channel writable again, or close it (writing = nil)
        }
    }

    /// Writes the next event once its gate is open, then the end after the last.
    private func nextEvent(context: ChannelHandlerContext) {
        guard case .events(let id, let next, let count) = writing else { return }
        if next == count {
            writing = nil
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            return
        }
        let loop = context.eventLoop
        let handler = NIOLoopBound(self, eventLoop: loop)
        let boundContext = NIOLoopBound(context, eventLoop: loop)
        state.whenOpen("\(id)-\(next)") {
            loop.execute {
                let handler = handler.value
                guard case .events(id, next, count)? = handler.writing else { return }  // closed meanwhile
                let line = ByteBuffer(string: "{\"n\":\(next)}\n")
                handler.writing = .events(id: id, next: next + 1, count: count)
                handler.state.record { $0.events[id]?.written = next + 1 }  // before the client can read it
                boundContext.value.writeAndFlush(handler.wrapOutboundOut(.body(.byteBuffer(line))), promise: nil)
                handler.nextEvent(context: boundContext.value)
            }
        }
    }
}
