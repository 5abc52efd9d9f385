import CurlQueueDemoServer
import NIOCore
import NIOHTTP1

/// What happens once a streamed pattern body has written all its bytes.
enum StreamEnding {
    /// Write `.end`: a normal, complete response.
    case end
    /// Write `.end`, then close the connection (`lie=-D`: surplus bytes were sent).
    case endThenClose
    /// Close the connection without `.end` (`closeAfter=`, `lie=+D`).
    case close
    /// Abort the connection with a TCP RST once the bytes are written, without `.end`
    /// (`resetAfter=`).
    case reset
    /// Send nothing more and keep the connection open until the client closes it (`stallAfter=`).
    case stall
}

/// A pattern body to stream: the head to send and which bytes to send after it.
struct ByteStreamPlan {
    var status: HTTPResponseStatus
    /// Must carry the framing (`Content-Length` or `Transfer-Encoding: chunked`).
    var headers: HTTPHeaders
    /// Body offset (pattern index) of the first byte sent.
    var firstByte: Int
    /// How many bytes to send (may be fewer than announced).
    var sendCount: Int
    /// Bytes per write (per chunk with chunked encoding).
    var chunkSize: Int
    /// If set, one chunk per interval instead of as fast as the client reads.
    var dripInterval: TimeAmount?
    /// If set, sending pauses before body offset `offset` until gate `gate` is open
    /// (`holdAt=OFFSET&gate=NAME`); a response that starts past the offset does not pause.
    var hold: (offset: Int, gate: String)?
    var ending: StreamEnding
}

/// Progress of the body being streamed on a connection.
struct ByteStream {
    var nextByte: Int
    var remaining: Int
    let chunkSize: Int
    let dripInterval: TimeAmount?
    /// With `dripInterval`: whether the next chunk may go out now (set by the drip timer).
    var dripDue = true
    /// Where to pause for a gate, until it opens (then `nil`).
    var hold: (offset: Int, gate: String)?
    var holdRequested = false
    let ending: StreamEnding
}

extension RouteHandler {
    func startStreaming(_ plan: ByteStreamPlan, context: ChannelHandlerContext) {
        writeHead(status: plan.status, headers: plan.headers, context: context)
        if isHeadRequest {
            // No body, so nothing to cut off or stall: just end (closing if the plan would).
            switch plan.ending {
            case .end, .stall:
                endResponse(context: context)
            case .endThenClose, .close, .reset:
                endResponse(context: context, thenClose: true)
            }
            return
        }
        stream = ByteStream(
            nextByte: plan.firstByte,
            remaining: plan.sendCount,
            chunkSize: plan.chunkSize,
            dripInterval: plan.dripInterval,
            hold: plan.hold.flatMap { $0.offset > plan.firstByte ? $0 : nil },
            ending: plan.ending
        )
        context.flush()  // the head goes out now even if the body waits (drip, stall at 0)
        pumpStream(context: context)
    }

    /// Writes as much of the body as the channel takes without growing its outbound buffer past
    /// the high-water mark, then flushes. Called again when the channel becomes writable (see
    /// `channelWritabilityChanged`) and on drip ticks, so memory stays bounded however large the
    /// body is. Chunks are zero-copy slices of the precomputed ``Pattern/buffer``.
    func pumpStream(context: ChannelHandlerContext) {
        // Flushing can synchronously report writability changes; the loop below re-checks
        // writability itself, so a nested call has nothing to add.
        guard !isPumping else { return }
        isPumping = true
        while var stream = self.stream {
            if stream.remaining == 0 {
                self.stream = nil
                isPumping = false
                finishStream(stream.ending, context: context)
                return
            }
            guard context.channel.isActive, context.channel.isWritable, stream.dripDue else {
                break  // resumed by channelWritabilityChanged or the drip timer
            }
            if let hold = stream.hold, stream.nextByte >= hold.offset {
                if !stream.holdRequested {
                    stream.holdRequested = true
                    self.stream = stream
                    waitForStreamGate(hold.gate, context: context)
                    // A gate that was open already is let go of at once, inside that call, whose
                    // own pump returns at once (`isPumping`): this loop sends the rest.
                    if self.stream != nil, self.stream!.hold == nil { continue }
                }
                break  // resumed when the gate opens
            }
            repeat {
                var count = min(stream.chunkSize, stream.remaining)
                if let hold = stream.hold { count = min(count, hold.offset - stream.nextByte) }
                let chunk = Pattern.slice(offset: stream.nextByte, count: count)
                context.write(wrapOutboundOut(.body(.byteBuffer(chunk))), promise: nil)
                stream.nextByte += count
                stream.remaining -= count
            } while stream.dripInterval == nil && stream.remaining > 0 && context.channel.isWritable
                && stream.nextByte < (stream.hold?.offset ?? .max)
            if let interval = stream.dripInterval, stream.remaining > 0 {
                stream.dripDue = false
                scheduleDripTick(after: interval, context: context)
            }
            self.stream = stream
            context.flush()  // may close the channel, which clears self.stream
        }
        isPumping = false
    }

    private func scheduleDripTick(after interval: TimeAmount, context: ChannelHandlerContext) {
        let generation = self.generation
        dripTask = context.eventLoop.assumeIsolated().scheduleTask(in: interval) {
            self.dripTask = nil
            guard self.generation == generation, self.stream != nil else { return }
            self.stream!.dripDue = true
            self.pumpStream(context: context)
        }
    }

    private func finishStream(_ ending: StreamEnding, context: ChannelHandlerContext) {
        switch ending {
        case .end:
            endResponse(context: context)
        case .endThenClose:
            endResponse(context: context, thenClose: true)
        case .close:
            closeAfterPendingWrites(context: context)
        case .reset:
            resetAfterPendingWrites(context: context)
        case .stall:
            context.flush()  // the request stays in flight until the client closes the connection
        }
    }
}
