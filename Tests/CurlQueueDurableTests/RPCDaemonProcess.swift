import CurlQueueTestHelpers
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

// What the RPC tests share: `curlq daemon --enable-rpc` in a process of its own (its port read
// from its start line, an event, not a guess), and a client that writes HTTP and WebSocket
// bytes on a plain socket, so that each test says exactly what goes on the wire.

/// A running `curlq daemon --enable-rpc --rpc-listen-port 0`, or with `--metrics-listen` and no RPC.
final class RPCDaemonProcess: @unchecked Sendable {  // safe: `process`, `port` and `box` are set in init and never changed; the box's fields are guarded by `lock`
    let process: Process
    let port: Int
    private let lock = NSCondition()
    private let box = Box()

    private final class Box: @unchecked Sendable {  // safe: read and written under the daemon's lock only
        var text = ""
        var closed = false
    }

    /// The listener whose port ``port`` is: the RPC's, or `--metrics-listen`'s (127.0.0.1:0
    /// unless `arguments` name one) without the RPC.
    enum Listener {
        case rpc
        case metrics
    }

    /// Starts the daemon on `store` into `folder` with `arguments` added, and waits for the
    /// start line of its `listener` (at most 60 s).
    init(store: String, folder: URL, listener: Listener = .rpc, arguments: [String] = [], environment: [String: String] = [:]) throws {
        process = Process()
        process.executableURL = builtProduct("curlq")
        let listening = switch listener {
        case .rpc: ["--enable-rpc", "--rpc-listen-port", "0"]
        case .metrics: arguments.contains("--metrics-listen") ? [] : ["--metrics-listen", "127.0.0.1:0"]
        }
        process.arguments = ["daemon", "--store", store, "-d", folder.path] + listening + ["--drain-timeout", "0"] + arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let reader = pipe.fileHandleForReading
        let (lock, box) = (self.lock, self.box)
        Thread {
            while true {
                let data = reader.availableData
                lock.lock()
                if data.isEmpty { box.closed = true } else { box.text += String(decoding: data, as: UTF8.self) }
                lock.broadcast()
                lock.unlock()
                if data.isEmpty { break }
            }
        }.start()
        let deadline = Date().addingTimeInterval(60)
        lock.lock()
        var port = Self.port(in: box.text, listener)
        while port == nil, !box.closed, lock.wait(until: deadline) { port = Self.port(in: box.text, listener) }
        let output = box.text
        lock.unlock()
        guard let port else {
            process.terminate()
            throw DaemonDidNotStart(output: output)
        }
        self.port = port
    }

    struct DaemonDidNotStart: Error, CustomStringConvertible {
        var output: String
        var description: String { "the daemon printed no listener's line: \(output)" }
    }

    /// A test that ended early (a failed `#require`) leaves no daemon behind.
    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    static func port(in text: String, _ listener: Listener = .rpc) -> Int? {
        switch listener {
        case .rpc:
            guard let range = text.range(of: "aria2 JSON-RPC at http://127.0.0.1:") else { return nil }
            return Int(text[range.upperBound...].prefix { $0.isNumber })
        case .metrics:
            // `Prometheus metrics at http://HOST:PORT/metrics`
            guard let start = text.range(of: "Prometheus metrics at http://"),
                  let end = text[start.upperBound...].range(of: "/metrics"),
                  let colon = text[start.upperBound..<end.lowerBound].lastIndex(of: ":") else { return nil }
            return Int(text[text.index(after: colon)..<end.lowerBound])
        }
    }

    /// Everything the daemon printed so far.
    var printed: String { lock.withLock { box.text } }

    /// SIGTERM, then its exit status (nil: killed after 30 s).
    func stop() async throws -> Int32? {
        kill(process.processIdentifier, SIGTERM)
        return try await waitForExit(of: process, within: .seconds(30))
    }
}

/// An HTTP response read off the socket.
struct RawResponse: CustomStringConvertible {
    var status: Int
    var headers: [(String, String)]
    var body: String
    func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
    var description: String { "\(status) \(headers) \(body)" }
    /// The body as a JSON object.
    func json() throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(body.utf8), options: [.fragmentsAllowed]) as? [String: Any], "\(body)")
    }
}

/// A TCP connection to 127.0.0.1:`port`, blocking, on the caller's thread (tests call it
/// through `offThePool`).
final class RawConnection {
    let fd: Int32
    private var buffer: [UInt8] = []

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            throw POSIXError(.ECONNREFUSED)
        }
    }

    deinit { close(fd) }

    func send(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written <= 0 { return }
            offset += written
        }
    }

    func send(_ text: String) { send(Array(text.utf8)) }

    /// Reads until `count` bytes are buffered; false at the end of the stream.
    private func fill(_ count: Int) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while buffer.count < count {
            let read = recv(fd, &chunk, chunk.count, 0)
            if read <= 0 { return false }
            buffer += chunk[0..<read]
        }
        return true
    }

    private func take(_ count: Int) -> [UInt8] {
        let bytes = Array(buffer.prefix(count))
        buffer.removeFirst(min(count, buffer.count))
        return bytes
    }

    /// One HTTP response (Content-Length framed); nil when the connection closed first.
    func response() -> RawResponse? {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            if let end = buffer.firstRange(of: Array("\r\n\r\n".utf8)) {
                let head = String(decoding: buffer[..<end.lowerBound], as: UTF8.self)
                buffer.removeFirst(end.upperBound)
                var lines = head.components(separatedBy: "\r\n")
                let statusLine = lines.removeFirst().split(separator: " ")
                let headers = lines.compactMap { line -> (String, String)? in
                    guard let colon = line.firstIndex(of: ":") else { return nil }
                    return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
                }
                let length = headers.first { $0.0.lowercased() == "content-length" }.flatMap { Int($0.1) } ?? 0
                guard fill(length) else { return nil }
                return RawResponse(status: statusLine.count > 1 ? Int(statusLine[1]) ?? 0 : 0, headers: headers,
                                   body: String(decoding: take(length), as: UTF8.self))
            }
            let read = recv(fd, &chunk, chunk.count, 0)
            if read <= 0 { return nil }
            buffer += chunk[0..<read]
        }
    }

    /// Whether the server closed the connection (reads to its end).
    func isClosed() -> Bool { !fill(buffer.count + 1) }

    /// Sends a WebSocket frame, masked as a client's must be.
    func sendFrame(opcode: UInt8, _ payload: [UInt8], fin: Bool = true) {
        var frame: [UInt8] = [(fin ? 0x80 : 0) | opcode]
        if payload.count < 126 {
            frame.append(0x80 | UInt8(payload.count))
        } else if payload.count <= 0xFFFF {
            frame += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            frame.append(0x80 | 127)
            for shift in stride(from: 56, through: 0, by: -8) { frame.append(UInt8((UInt64(payload.count) >> UInt64(shift)) & 0xFF)) }
        }
        let mask: [UInt8] = [0x12, 0x34, 0x56, 0x78]
        frame += mask
        frame += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        send(frame)
    }

    /// One WebSocket frame from the server: its opcode and payload; nil when closed.
    func frame() -> (opcode: UInt8, payload: [UInt8])? {
        guard fill(2) else { return nil }
        let head = take(2)
        var length = Int(head[1] & 0x7F)
        if length == 126 {
            guard fill(2) else { return nil }
            let bytes = take(2)
            length = Int(bytes[0]) << 8 | Int(bytes[1])
        } else if length == 127 {
            guard fill(8) else { return nil }
            length = take(8).reduce(0) { $0 << 8 | Int($1) }
        }
        guard fill(length) else { return nil }
        return (head[0] & 0x0F, take(length))
    }

    /// The WebSocket handshake at `/jsonrpc`; the response's status.
    func upgrade(host: String = "127.0.0.1", origin: String? = nil) -> Int {
        send("GET /jsonrpc HTTP/1.1\r\nHost: \(host)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            + (origin.map { "Origin: \($0)\r\n" } ?? "") + "\r\n")
        return response()?.status ?? 0
    }
}

/// POSTs `body` to `/jsonrpc` on its own connection, with `headers` (Host 127.0.0.1 unless given).
func rpcPost(port: Int, _ body: String, headers: [String: String] = [:]) async throws -> RawResponse {
    try await offThePool {
        let connection = try RawConnection(port: port)
        var fields = ["Host": "127.0.0.1:\(port)", "Content-Type": "application/json"].merging(headers) { $1 }
        fields["Content-Length"] = fields["Content-Length"] ?? String(body.utf8.count)
        let head = "POST /jsonrpc HTTP/1.1\r\n" + fields.map { "\($0.key): \($0.value)\r\n" }.joined() + "\r\n"
        connection.send(head + body)
        guard let response = connection.response() else { throw POSIXError(.ECONNRESET) }
        return response
    }
}

/// One JSON-RPC call (`params` as JSON text): the reply object.
func rpcCall(port: Int, _ method: String, _ params: String = "[]", id: String = "1") async throws -> [String: Any] {
    let response = try await rpcPost(port: port, #"{"jsonrpc":"2.0","id":\#(id),"method":"\#(method)","params":\#(params)}"#)
    return try response.json()
}

/// The `result` of a call that must succeed.
func rpcResult(port: Int, _ method: String, _ params: String = "[]") async throws -> Any {
    let reply = try await rpcCall(port: port, method, params)
    return try #require(reply["result"], "\(method) \(params): \(reply)")
}
