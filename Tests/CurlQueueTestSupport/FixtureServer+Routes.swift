import CurlQueueDemoServer
import NIOCore
import NIOHTTP1

/// What to answer one request with. ``Routes/plan(method:target:headers:state:)`` decides it from
/// the request; ``RouteHandler`` carries it out (after the request's `delay=`).
enum ResponsePlan {
    /// A response whose body is known up front.
    case fixed(FixedResponse)
    /// A `/bytes`-style pattern body, streamed with backpressure.
    case bytes(ByteStreamPlan)
    /// The `/echo` JSON document (needs the whole request body, which the handler has).
    case echo
    /// The request body itself as the response body, with `Content-Encoding: encoding` if given
    /// (`/reflect?encoding=gzip`: a compressed body, without the fixture compressing anything).
    case reflect(encoding: String?)
    /// Answer `200 "open NAME"` once gate `NAME` is open.
    case gate(name: String)
    /// Close the connection without answering.
    case close
    /// Abort the connection with a TCP RST, without answering.
    case reset
    /// Write these bytes below the HTTP encoder, then close (with a RST if `reset`).
    case raw(ByteBuffer, reset: Bool)
    /// Write these bytes below the HTTP encoder one by one, `interval` apart, stopping after
    /// `stallAfter` of them (RouteHandler+Stalls.swift).
    case trickle([ByteBuffer], interval: TimeAmount, stallAfter: Int?)
    /// A chunked NDJSON body, one line per write (FixtureServer+Streams.swift).
    case lines(LinesPlan)
    /// Close every other open connection, then answer `200 "closed N"`.
    case closeOtherConnections
    /// Answer `response` (keep-alive), then write `leftover` ahead of the next response on the
    /// same connection: what a server that sent more than it announced leaves behind, without
    /// the race of when those bytes reach the client.
    case leaveBehind(FixedResponse, leftover: ByteBuffer)
    /// Answer `response` (keep-alive) and write `surplus` right after its body, in the same
    /// flush: a server that sent more than its `Content-Length` announced.
    case withSurplus(FixedResponse, surplus: ByteBuffer)
}

/// A response with a body known up front.
struct FixedResponse {
    var status: HTTPResponseStatus
    var headers: HTTPHeaders
    var body: ByteBuffer
    /// If set, the head still announces the whole body, but only this many body bytes are sent
    /// before the connection is closed.
    var closeAfterBytes: Int?

    init(status: HTTPResponseStatus, headers: HTTPHeaders = [:], body: ByteBuffer, closeAfterBytes: Int? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
        self.closeAfterBytes = closeAfterBytes
    }

    /// A `text/plain` response.
    static func text(_ status: HTTPResponseStatus, _ text: String, headers: HTTPHeaders = [:]) -> FixedResponse {
        var headers = headers
        headers.replaceOrAdd(name: "Content-Type", value: "text/plain; charset=utf-8")
        return FixedResponse(status: status, headers: headers, body: ByteBuffer(string: text))
    }
}

/// The fixture's routes. Every route also accepts `delay=MS`, which the handler applies before
/// carrying out the plan.
enum Routes {
    /// The default write size for pattern bodies.
    static let defaultChunkSize = 64 * 1024
    /// The largest `chunk=` honoured (larger values are clamped), so one write never needs a
    /// huge temporary buffer.
    static let maxChunkSize = 16 * 1024 * 1024

    static func plan(
        method: HTTPMethod,
        target: RequestTarget,
        headers: HTTPHeaders,
        state: ServerState
    ) -> ResponsePlan {
        let segments = target.segments
        switch (segments.first ?? "", segments.count) {
        case ("bytes", 2):
            guard method == .GET || method == .HEAD else {
                return .fixed(.text(.methodNotAllowed, "use GET or HEAD", headers: ["Allow": "GET, HEAD"]))
            }
            guard let total = Int(segments[1]), total >= 0 else {
                return .fixed(.text(.badRequest, "bad byte count"))
            }
            return bytes(total: total, target: target, rangeHeader: headers.first(name: "range"), ifRange: headers.first(name: "if-range"))
        case ("reflect", 1):
            return .reflect(encoding: target.query["encoding"])
        case ("echo", 1):
            return .echo
        case ("json", 1):
            return .fixed(json(target: target))
        case ("lines", 1): return lines(target: target)
        case ("status", 2):
            guard let code = Int(segments[1]), (200...999).contains(code) else {
                return .fixed(.text(.badRequest, "status must be 200...999"))
            }
            return .fixed(status(code, target: target))
        case ("versioned", 2) where !segments[1].isEmpty:
            return versioned(id: segments[1], target: target, headers: headers, state: state)
        case ("flaky", 2) where !segments[1].isEmpty:
            return flaky(id: segments[1], target: target, rangeHeader: headers.first(name: "range"), state: state)
        case ("redirect", 1):
            guard let location = target.query["to"] else {
                return .fixed(.text(.badRequest, "missing to="))
            }
            return .fixed(redirect(to: location, code: target.int("status") ?? 302))
        case ("redirect-chain", 2):
            guard let remaining = Int(segments[1]) else {
                return .fixed(.text(.badRequest, "bad redirect count"))
            }
            if remaining <= 0 {
                return .fixed(.text(.ok, "end"))
            }
            let query = target.rawQuery.map { "?" + $0 } ?? ""
            return .fixed(redirect(to: "/redirect-chain/\(remaining - 1)\(query)", code: 302))
        case ("redirect-loop", 1):
            let query = target.rawQuery.map { "?" + $0 } ?? ""
            return .fixed(redirect(to: target.path + query, code: 302))
        case ("gate", 2) where !segments[1].isEmpty:
            return .gate(name: segments[1])
        case ("headers", 1):
            return .fixed(fillHeaders(count: target.int("count") ?? 1, size: target.int("size") ?? 16))
        case ("set-cookie", 1):
            return .fixed(setCookie(target: target))
        case ("auth", _):
            return auth(target: target, headers: headers, state: state)
        case ("cache", 2) where !segments[1].isEmpty:
            return cache(id: segments[1], target: target, headers: headers, state: state)
        case ("close-connections", 1):
            return .closeOtherConnections
        case ("leftover", 1):
            let bytes = target.query["bytes"] ?? "HELLO THERE\r\n"
            return .leaveBehind(.text(.ok, "ok"), leftover: ByteBuffer(string: bytes))
        case ("surplus", 1):
            return .withSurplus(.text(.ok, "ok"), surplus: ByteBuffer(string: surplus(kind: target.query["kind"])))
        case ("trickle-head", 1):
            let interval = TimeAmount.milliseconds(Int64(max(1, target.int("interval") ?? 100)))
            return .trickle(RouteHandler.trickledResponse(byLine: target.flag("lines")), interval: interval, stallAfter: target.int("stallAfter"))
        case ("raw", 1):
            switch target.query["kind"] {
            case "garbageStatus":
                return .raw(ByteBuffer(string: "HELLO THERE\r\n\r\n"), reset: false)
            case "midHeaders":
                return .raw(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Le"), reset: false)
            case "midHeadersReset":
                return .raw(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Le"), reset: true)
            case "reset":
                return .reset
            default:
                return .fixed(.text(.badRequest, "kind must be garbageStatus, midHeaders, midHeadersReset or reset"))
            }
        default:
            return .fixed(.text(.notFound, "not found"))
        }
    }

    // MARK: /bytes

    /// The plan for `/bytes/TOTAL`, honouring `Range` (unless `norange=1`) and the body options.
    /// With `etag=E`, an `If-Range` naming another validator gets the whole body (200).
    static func bytes(total: Int, target: RequestTarget, rangeHeader: String?, ifRange: String? = nil) -> ResponsePlan {
        let honoursRanges = !target.flag("norange")
        var headers: HTTPHeaders = ["Content-Type": "application/octet-stream"]
        if honoursRanges {
            headers.add(name: "Accept-Ranges", value: "bytes")
        }
        // `etag=E`: `ETag: "E"`, a validator for split downloads (curlq -s).
        let eTag = target.query["etag"].map { "\"\($0)\"" }
        if let eTag { headers.add(name: "ETag", value: eTag) }
        let rangeHeader = eTag == nil || ifRange == nil || ifRange == eTag ? rangeHeader : nil

        var status = HTTPResponseStatus.ok
        var first = 0
        var length = total
        switch honoursRanges ? ByteRange(header: rangeHeader, total: total) : .none {
        case .none:
            if let part = target.int("unasked"), part > 0, part < total {
                // A part nobody asked for: the first `part` bytes, as a 206.
                status = .partialContent
                length = part
                headers.add(name: "Content-Range", value: "bytes 0-\(part - 1)/\(total)")
            }
        case .satisfiable(let rangeFirst, let rangeLast):
            status = .partialContent
            first = rangeFirst
            if target.flag("rangeEmpty") {
                // A 206 with no body and no Content-Range.
                length = 0
                break
            }
            // `rangeShort=K`: only the first K bytes of the range asked for, and says so.
            let last = target.int("rangeShort").map { min(rangeLast, rangeFirst + max(1, $0) - 1) } ?? rangeLast
            length = last - rangeFirst + 1
            headers.add(name: "Content-Range", value: "bytes \(rangeFirst)-\(last)/\(total)")
        case .unsatisfiable:
            headers.add(name: "Content-Range", value: "bytes */\(total)")
            return .fixed(.text(.rangeNotSatisfiable, "range not satisfiable", headers: headers))
        }

        var plan = ByteStreamPlan(
            status: status,
            headers: headers,
            firstByte: first,
            sendCount: length,
            chunkSize: min(max(1, target.int("chunk") ?? defaultChunkSize), maxChunkSize),
            dripInterval: target.int("drip").map { .milliseconds(Int64(max(0, $0))) },
            hold: target.int("holdAt").flatMap { offset in target.query["gate"].map { (offset, $0) } },
            ending: .end
        )
        // `cutRangeAt=F&cutAfter=K`: a 206 whose range starts at F sends K bytes and closes.
        if status == .partialContent, let cutAt = target.int("cutRangeAt"), cutAt == first {
            plan.sendCount = min(max(0, target.int("cutAfter") ?? 0), length)
            plan.ending = .close
        }
        // `cd=V`: `Content-Disposition: V` (curlq -J); with `cdWhole=1` on a 200 only, not a 206.
        if let disposition = target.query["cd"], !(target.flag("cdWhole") && status == .partialContent) {
            plan.headers.add(name: "Content-Disposition", value: disposition)
        }
        let chunked = target.flag("chunked")
        var announcedLength = length
        if let closeAfter = target.int("closeAfter") {
            plan.sendCount = min(max(0, closeAfter), length)
            plan.ending = .close
        } else if let resetAfter = target.int("resetAfter") {
            plan.sendCount = min(max(0, resetAfter), length)
            plan.ending = .reset
        } else if let stallAfter = target.int("stallAfter") {
            plan.sendCount = min(max(0, stallAfter), length)
            plan.ending = .stall
        } else if let lie = target.int("lie"), lie != 0, !chunked {
            announcedLength = max(0, length + lie)
            // Too short a Content-Length leaves the surplus bytes where the next response should
            // start, so that connection is closed too once everything is written.
            plan.ending = lie > 0 ? .close : .endThenClose
        }
        if chunked {
            plan.headers.add(name: "Transfer-Encoding", value: "chunked")
        } else {
            plan.headers.add(name: "Content-Length", value: String(announcedLength))
        }
        return .bytes(plan)
    }

    // MARK: /versioned

    /// `/versioned/ID?bytes=K`: a file that changes with every request for ID. Version v is
    /// K bytes of the pattern from offset v - 1 (so versions differ at every byte), with
    /// `ETag: "vN"` (`weak=1`: `W/"vN"`) and a `Last-Modified` of its own. Range is honoured
    /// unless an `If-Range` names another version, which gets the whole new version with 200.
    /// `closeFirst=C`: the first version is cut off after C bytes (a connection lost mid-body).
    static func versioned(id: String, target: RequestTarget, headers requestHeaders: HTTPHeaders, state: ServerState) -> ResponsePlan {
        let version = state.recordFlakyHit("versioned-" + id)
        let total = max(0, target.int("bytes") ?? 1000)
        let etag = (target.flag("weak") ? "W/" : "") + "\"v\(version)\""
        let lastModified = HTTPDateFormatter.imfFixdate(secondsSince1970: 1_600_000_000 + version * 3600)
        var headers: HTTPHeaders = [
            "Content-Type": "application/octet-stream", "Accept-Ranges": "bytes", "ETag": etag, "Last-Modified": lastModified,
        ]
        var status = HTTPResponseStatus.ok
        var first = 0
        let ifRange = requestHeaders.first(name: "if-range")
        if ifRange == nil || ifRange == etag || ifRange == lastModified,
           case .satisfiable(let rangeFirst, let rangeLast) = ByteRange(header: requestHeaders.first(name: "range"), total: total) {
            status = .partialContent
            first = rangeFirst
            headers.add(name: "Content-Range", value: "bytes \(rangeFirst)-\(rangeLast)/\(total)")
        }
        let length = total - first
        headers.add(name: "Content-Length", value: String(length))
        var plan = ByteStreamPlan(
            status: status, headers: headers, firstByte: first + version - 1, sendCount: length,
            chunkSize: 4096, dripInterval: nil, ending: .end)
        if version == 1, let cut = target.int("closeFirst") {
            plan.sendCount = min(max(0, cut), length)
            plan.ending = .close
        }
        return .bytes(plan)
    }

    // MARK: /status, /flaky

    static func status(_ code: Int, target: RequestTarget) -> FixedResponse {
        var headers: HTTPHeaders = [:]
        addRetryAfter(from: target, to: &headers)
        return .text(HTTPResponseStatus(statusCode: code), "status \(code)", headers: headers)
    }

    /// `retryAfter=S` is copied verbatim (so tests can send malformed values);
    /// `retryAfterDate=S` becomes an HTTP-date S seconds from now.
    static func addRetryAfter(from target: RequestTarget, to headers: inout HTTPHeaders) {
        if let value = target.query["retryAfter"] {
            headers.add(name: "Retry-After", value: value)
        }
        if let seconds = target.int("retryAfterDate") {
            headers.add(name: "Retry-After", value: HTTPDateFormatter.fromNow(seconds: seconds))
        }
    }

    static func flaky(id: String, target: RequestTarget, rangeHeader: String?, state: ServerState) -> ResponsePlan {
        let hit = state.recordFlakyHit(id)
        let byteCount = target.int("bytes").map { max(0, $0) }
        if hit > (target.int("failures") ?? 1) {
            guard let byteCount else {
                return .fixed(.text(.ok, "ok \(id)"))
            }
            if target.flag("ranges") { return bytes(total: byteCount, target: target, rangeHeader: rangeHeader) }
            return .bytes(
                ByteStreamPlan(
                    status: .ok,
                    headers: ["Content-Type": "application/octet-stream", "Content-Length": String(byteCount)],
                    firstByte: 0,
                    sendCount: byteCount,
                    chunkSize: defaultChunkSize,
                    dripInterval: nil,
                    ending: .end
                )
            )
        }
        switch target.query["mode"] ?? "status" {
        case "close":
            return .close
        case "reset":
            return .reset
        case "closeMidBody":
            // The body the success would have had, announced in full, cut off halfway.
            var response: FixedResponse
            if let byteCount {
                response = FixedResponse(
                    status: .ok,
                    headers: ["Content-Type": "application/octet-stream"],
                    body: Pattern.slice(offset: 0, count: byteCount)
                )
            } else {
                response = .text(.ok, "ok \(id)")
            }
            response.closeAfterBytes = response.body.readableBytes / 2
            return .fixed(response)
        default:  // "status"
            let code = target.int("status") ?? 503
            guard (200...999).contains(code) else {
                return .fixed(.text(.badRequest, "status must be 200...999"))
            }
            return .fixed(status(code, target: target))
        }
    }

    // MARK: Small routes

    /// The bytes of `/surplus?kind=K` and ``FixtureServer/writeSurplus(_:onConnection:)``:
    /// `response` is a complete, well-formed response whose body is `EVIL`; anything else is
    /// the bare text `EVIL`.
    static func surplus(kind: String?) -> String {
        kind == "response" ? "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Type: text/plain\r\n\r\nEVIL" : "EVIL"
    }

    static func redirect(to location: String, code: Int) -> FixedResponse {
        .text(HTTPResponseStatus(statusCode: code), "redirecting to \(location)", headers: ["Location": location])
    }

    /// `count` headers `X-Fill-1` … `X-Fill-N`, each value `size` letters long.
    static func fillHeaders(count: Int, size: Int) -> FixedResponse {
        var headers: HTTPHeaders = [:]
        let letters = Array("abcdefghijklmnopqrstuvwxyz")
        if count > 0 {
            for index in 1...count {
                let letter = letters[(index - 1) % letters.count]
                headers.add(name: "X-Fill-\(index)", value: String(repeating: letter, count: max(0, size)))
            }
        }
        return .text(.ok, "\(max(0, count)) headers", headers: headers)
    }

    /// One `Set-Cookie` per query parameter other than `delay` (`NAME=VALUE; Path=/`), or
    /// `fixture=1; Path=/` if there are none.
    static func setCookie(target: RequestTarget) -> FixedResponse {
        var cookies = target.query.filter { $0.key != "delay" }.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        if cookies.isEmpty {
            cookies = [("fixture", "1")]
        }
        var headers: HTTPHeaders = [:]
        for (name, value) in cookies {
            headers.add(name: "Set-Cookie", value: "\(name)=\(value); Path=/")
        }
        return .text(.ok, "cookies set", headers: headers)
    }
}
