import CurlQueueDemoServer
public import Foundation
import NIOConcurrencyHelpers
import NIOCore

/// The server of the OpenAPI fixture document (Tests/OpenAPIFixtureClient/openapi.yaml), on
/// `127.0.0.1`, for CurlQueueOpenAPI's tests and benchmark. It records what it saw of uploads,
/// downloads and event streams (``Snapshot``), so that a test can show streaming, backpressure and
/// cancellation from the server's side.
///
/// | Operation | Answer |
/// | --- | --- |
/// | `GET /items/{id}?verbose=` | `200 {"id","name":"item ID","tag" (the `X-Request-Tag` field),"verbose"}`; ids from 1000 up: `404 {"message"}`; `X-Request-Tag: hold`: no answer (``Snapshot/held``). |
/// | `POST /items` | `201 {"id":1,"name"}` with the name of the JSON body. |
/// | `PUT /blobs/{name}` | `200 {"bytes","pieces","checksum"}`: the body's size, the reads it took, the sum of its bytes; each byte is checked against the pattern (``Upload/mismatchAt``). Options: `holdAfter=K` (stop reading once K body bytes arrived, until gate `NAME-hold` opens), `status=N` (answer N after the body, with `Location: /blobs/NAME-next` for a 3xx). |
/// | `GET /download?size=N&id=ID` | N bytes of ``FixtureServer/expectedBytes(offset:count:)``, written only while the connection is writable (backpressure). |
/// | `GET /events?count=N&id=ID` | Chunked `application/jsonl`, line i `{"n":i}` written once gate `ID-i` is open (``openGate(_:)``). |
public final class OpenAPIFixtureServer: Sendable {
    /// What the server has seen of a download (`GET /download?id=`).
    public struct Download: Sendable, Hashable {
        /// The size asked for.
        public var size: Int
        /// Body bytes handed to the socket so far.
        public var written = 0
        /// How many times writing stopped because the client was not reading (the socket and the
        /// channel's buffer were full).
        public var pauses = 0
        /// Whether every byte was written.
        public var finished = false
        /// Whether the connection closed before every byte was written.
        public var closedEarly = false
    }

    /// What the server has seen of an event stream (`GET /events?id=`).
    public struct Events: Sendable, Hashable {
        /// Lines written so far.
        public var written = 0
        /// Whether the connection closed before the last line was written.
        public var closedEarly = false
    }

    /// What the server has seen of an upload (`PUT /blobs/{name}`), by name (the last request's,
    /// but ``requests`` counts them all).
    public struct Upload: Sendable, Hashable {
        /// Body bytes received.
        public var bytes = 0
        /// The reads the body arrived in.
        public var pieces = 0
        /// Whether the body's end arrived.
        public var complete = false
        /// The first body offset whose byte is not ``FixtureServer/expectedBytes(offset:count:)``'s,
        /// or nil while every byte is.
        public var mismatchAt: Int?
        /// The request's `Content-Length`, if it had one.
        public var contentLength: Int?
        /// Whether the request came with `Transfer-Encoding: chunked`.
        public var chunked = false
        /// Whether the connection closed before the body's end arrived.
        public var closedEarly = false
        /// Requests for this name so far.
        public var requests = 0
        /// Whether the server stopped reading (`holdAfter=`) and waits for its gate.
        public var held = false
    }

    /// Everything recorded, by ID (downloads, events) or name (uploads).
    public struct Snapshot: Sendable {
        public var downloads: [String: Download] = [:]
        public var events: [String: Events] = [:]
        public var uploads: [String: Upload] = [:]
        /// Requests answered, of every operation.
        public var requests = 0
        /// `getItem` calls with `X-Request-Tag: hold`, which get no answer.
        public var held = 0
        /// Connections of held calls that the client closed.
        public var heldClosed = 0
    }

    /// ``waitUntil(timeout:_:)`` gave up.
    public struct TimedOut: Error, CustomStringConvertible {
        public let after: Duration
        public var description: String { "the server's record did not reach the condition in \(after)" }
    }

    let state: OpenAPIFixtureState
    let listener: Listener

    /// The TCP port it listens on.
    public var port: Int { listener.port }
    /// `http://127.0.0.1:PORT`.
    public var baseURL: URL { URL(string: listener.baseURL)! }

    private init(state: OpenAPIFixtureState, listener: Listener) {
        self.state = state
        self.listener = listener
    }

    /// Starts a server on `127.0.0.1:port` (0: a free port).
    public static func start(port: Int = 0) async throws -> OpenAPIFixtureServer {
        let state = OpenAPIFixtureState()
        let listener = try await Listener.bind(
            port: port,
            accepted: { state.accepted($0) },
            closed: { state.closed($0) },
            makeHandler: { OpenAPIFixtureHandler(state: state, connectionID: $0) }
        )
        return OpenAPIFixtureServer(state: state, listener: listener)
    }

    /// What the server has recorded so far.
    public var snapshot: Snapshot { state.box.withLockedValue { $0.snapshot } }

    /// Lets line `name`'s writer go (`ID-i` for line i of `/events?id=ID`); one opened before its
    /// line is reached lets it go at once.
    public func openGate(_ name: String) { state.openGate(name) }

    /// Returns once `condition` holds for the record (checked at once and on every change).
    /// - Throws: ``TimedOut`` after `timeout`.
    public func waitUntil(timeout: Duration = .seconds(30),
                          _ condition: @escaping @Sendable (Snapshot) -> Bool) async throws {
        try await state.waitUntil(timeout: timeout, condition)
    }

    deinit {
        // A server dropped without `shutdown()` (a test that threw) must not keep its port.
        let channels = state.box.withLockedValue { state -> [any Channel] in
            defer { state.isShutDown = true }
            return state.isShutDown ? [] : Array(state.connections.values) + [listener.channel]
        }
        for channel in channels { channel.close(promise: nil) }
    }

    /// Stops listening and closes every connection.
    public func shutdown() async throws {
        let channels = state.box.withLockedValue { state -> [any Channel] in
            state.isShutDown = true
            return Array(state.connections.values)
        }
        try await listener.close(connections: channels)
    }
}
