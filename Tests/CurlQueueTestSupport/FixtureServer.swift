import CurlQueueDemoServer
public import Foundation
import NIOCore

/// A local HTTP/1.1 server with deliberately awkward routes, for testing an HTTP client against
/// real (and really broken) server behaviour.
///
/// It listens on `127.0.0.1` only, supports keep-alive and pipelining, and records every request.
/// Every route accepts `delay=MS` (wait that long before answering). Query parameters may come in
/// any order.
///
/// | Route | Answer |
/// | --- | --- |
/// | `GET/HEAD /bytes/N` | N bytes of ``expectedBytes(offset:count:)``. Honours `Range: bytes=A-`, `A-B`, `-S` (206, or 416 with `Content-Range: bytes */N`). Options: `chunked=1`, `chunk=K` (write size, default 64 KiB, at most 16 MiB), `norange=1`, `closeAfter=K`, `resetAfter=K` (a TCP RST after K body bytes), `stallAfter=K`, `drip=MS` (one chunk per MS), `holdAt=K&gate=NAME` (pause before body offset K until gate NAME opens; a range starting past K does not pause), `lie=+D` / `lie=-D` (announce N±D, send N, then close); broken ranges: `rangeShort=K` (a 206 of only K bytes of the range asked for, its Content-Range saying so), `rangeEmpty=1` (a 206 with no body and no Content-Range), `unasked=K` (without a Range, a 206 of the first K bytes); `etag=E` (`ETag: "E"`; an `If-Range` naming another gets 200, whole), `cutRangeAt=F&cutAfter=K` (a 206 whose range starts at F sends K bytes, then closes). |
/// | `/echo` (any method) | JSON `{"method","uri","headers":[[name,value]…],"bodyLength","body"}`, `body` base64 (empty when over 1 MiB). |
/// | `/reflect?encoding=E` (any method) | The request body as the response body (up to 1 MiB), with `Content-Encoding: E` if given. |
/// | `/json?body=TEXT` | `200` with TEXT as an `application/json` body; `type=` another content type, `status=N` another status. |
/// | `/status/CODE` | That status, body `status CODE`; `retryAfter=S`, `retryAfterDate=S` add `Retry-After`. |
/// | `/flaky/ID?failures=N&mode=M` | First N requests for ID fail, then `200 "ok ID"` (or `bytes=K` pattern bytes; with `ranges=1` as `/bytes/K` answers, Range included). Modes: `status` (`status=CODE`, default 503, plus retryAfter options), `close`, `reset`, `closeMidBody`. See ``hits(_:)``. |
/// | `/versioned/ID?bytes=K` | A file that changes with every request for ID: version v is K pattern bytes from offset v-1, with `ETag: "vN"` (`weak=1`: `W/"vN"`) and its own `Last-Modified`. Honours Range unless an `If-Range` names another version (then 200 with the whole new one). `closeFirst=C` cuts the first version off after C bytes. |
/// | `/redirect?to=URL&status=302` | Redirect to URL (percent-decoded). |
/// | `/redirect-chain/N` | 302 to `/redirect-chain/N-1`; `/redirect-chain/0` is `200 "end"`. |
/// | `/redirect-loop` | 302 to itself. |
/// | `/gate/NAME` | No answer until ``openGate(_:)``, then `200 "open NAME"`. |
/// | `/headers?count=N&size=S` | N extra headers `X-Fill-1`…`X-Fill-N`, S bytes each. |
/// | `/set-cookie?NAME=VALUE…` | One `Set-Cookie` per parameter (default `fixture=1`). |
/// | `GET /lines?count=N` | A chunked NDJSON body, `{"n":i}` one line per write. Options: `gate=NAME` (line i waits for gate `NAME-i`), `interval=MS`, no `count` for a never-ending heartbeat, `pad=K`, `thenClose=1` (close without the last chunk), `id=ID` (``waitUntilClosed(_:)``). |
/// | `/close-connections` | Closes every other open connection, then `200 "closed N"` (keep-alive). |
/// | `/leftover?bytes=TEXT` | `200 "ok"` (keep-alive), then TEXT (default `HELLO THERE` and CRLF) written ahead of the next response on that connection, as a server that sent more than it announced leaves it. |
/// | `/surplus?kind=K` | `200 "ok"` (keep-alive, `Content-Length: 2`) with `Routes.surplus(kind:)` (`response`: a complete response whose body is `EVIL`; otherwise the bare text `EVIL`) after the body in the same write; see also ``writeSurplus(_:onConnection:)``. |
/// | `/trickle-head?interval=MS` | A head (`200`, 8 filler fields, body `ok`) one byte per MS (default 100), then close; `lines=1`: a line per MS; `stallAfter=K`: nothing after K bytes (lines), the connection kept open. |
/// | `/stall-upload` (any method) | Stops reading the connection once the request head arrived: the body stalls when the socket buffers are full. No answer. |
/// | `/raw?kind=K` | Not HTTP: `garbageStatus` or `midHeaders` (then close), `midHeadersReset` (then RST), `reset` (RST at once). |
/// | anything else | `404 "not found"` |
public final class FixtureServer: Sendable {
    let state: ServerState
    let listener: Listener

    /// The TCP port the server listens on.
    public var port: Int { listener.port }

    private init(state: ServerState, listener: Listener) {
        self.state = state
        self.listener = listener
    }

    /// Starts a server on `127.0.0.1`.
    ///
    /// - Parameter port: The port to listen on; 0 (the default) picks a free ephemeral port.
    /// - Throws: If the port cannot be bound, e.g. because it is taken.
    public static func start(port: Int = 0) async throws -> FixtureServer {
        let state = ServerState()
        let listener = try await Listener.bind(
            port: port,
            accepted: { state.connectionAccepted($0) },
            closed: { state.connectionClosed($0) },
            makeHandler: { RouteHandler(state: state, connectionID: $0) }
        )
        return FixtureServer(state: state, listener: listener)
    }

    deinit {
        // A server dropped without `shutdown()` must not keep its port or connections open.
        if !state.isShutDown {
            let (channels, waiters) = state.beginShutdown()
            listener.channel.close(promise: nil)
            for channel in channels {
                channel.close(promise: nil)
            }
            for waiter in waiters {
                waiter.timeout?.cancel()
                waiter.continuation.resume(throwing: FixtureServerError.shutDown)
            }
        }
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    public var baseURL: String { listener.baseURL }

    /// ``baseURL`` followed by `pathAndQuery`, which must start with `/` and be a valid URL
    /// path and query (percent-encode anything else).
    public func url(_ pathAndQuery: String) -> URL { listener.url(pathAndQuery) }

    /// Stops listening and closes every open connection (responses in progress are cut off,
    /// gates and stalls included). Pending ``waitForRequests(pathPrefix:count:timeout:)`` calls
    /// throw ``FixtureServerError/shutDown``. Calling it again does nothing.
    public func shutdown() async throws {
        let (channels, waiters) = state.beginShutdown()
        for waiter in waiters {
            waiter.timeout?.cancel()
            waiter.continuation.resume(throwing: FixtureServerError.shutDown)
        }
        try await listener.close(connections: channels)
    }

    /// The first `count` bytes, from body offset `offset`, of every pattern body (`/bytes/N`
    /// serves `expectedBytes(count: N)`; a `Range: bytes=A-B` response is
    /// `expectedBytes(offset: A, count: B - A + 1)`). Byte `i` is a fixed function of
    /// `i % 65521`.
    public static func expectedBytes(offset: Int = 0, count: Int) -> [UInt8] {
        Pattern.bytes(offset: offset, count: count)
    }
}
