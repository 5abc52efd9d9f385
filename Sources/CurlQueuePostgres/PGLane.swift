internal import CurlQueue
internal import Dispatch
internal import Foundation
#if canImport(Glibc)
internal import Glibc
#endif

/// One connection and the serial queue it is used on: libpq blocks, so its calls run there,
/// never on Swift's cooperative pool. A lost connection is opened again on the next call, no
/// sooner than its backoff allows (0.1 s, doubling to 5 s, reset by a successful connect); a
/// call in between fails at once with `.unavailable`, so callers never queue behind a dead server.
final class PGLane: @unchecked Sendable {  // safe: `connection`, `retryAt` and `backoff` are only touched on `queue`
    private let queue: DispatchQueue
    private let conninfo: String
    private var connection: PGConnection?
    private var retryAt: DispatchTime = .now()
    private var backoff: Double = 0.1

    init(conninfo: String, label: String) {
        self.conninfo = conninfo
        self.queue = DispatchQueue(label: label)
    }

    /// Runs `body` with the connection on the lane's queue. A statement error leaves the
    /// connection usable; a lost connection is dropped, and reopened by a later call.
    func run<T: Sendable>(_ body: @escaping @Sendable (PGConnection) throws(PostgresStoreError) -> T) async throws(PostgresStoreError) -> T {
        try await result(body).get()
    }

    /// `run`, with its error as a value.
    func result<T: Sendable>(_ body: @escaping @Sendable (PGConnection) throws(PostgresStoreError) -> T) async -> Result<T, PostgresStoreError> {
        await withCheckedContinuation { continuation in
            queue.async {
                continuation.resume(returning: Result { () throws(PostgresStoreError) -> T in try self.runHere(body) })
            }
        }
    }

    /// `body` inside BEGIN … COMMIT; anything thrown rolls it back.
    func transaction<T: Sendable>(_ body: @escaping @Sendable (PGConnection) throws(PostgresStoreError) -> T) async throws(PostgresStoreError) -> T {
        try await run { (connection) throws(PostgresStoreError) -> T in
            try connection.query("BEGIN")
            do throws(PostgresStoreError) {
                let value = try body(connection)
                try connection.query("COMMIT")
                return value
            } catch {
                if !connection.isBroken { _ = try? connection.query("ROLLBACK") }
                throw error
            }
        }
    }

    /// Closes the connection (the next call opens a new one).
    func close() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                self.connection = nil
                continuation.resume()
            }
        }
    }

    private func runHere<T>(_ body: (PGConnection) throws(PostgresStoreError) -> T) throws(PostgresStoreError) -> T {
        let connection = try connected()
        do {
            return try body(connection)
        } catch {
            if error.kind == .unavailable || connection.isBroken { self.connection = nil }
            throw error
        }
    }

    private func connected() throws(PostgresStoreError) -> PGConnection {
        if let connection, !connection.isBroken { return connection }
        connection = nil
        guard DispatchTime.now() >= retryAt else {
            throw PostgresStoreError(kind: .unavailable, message: "the server was unreachable; trying again after a backoff")
        }
        do {
            let fresh = try PGConnection(conninfo: conninfo)
            connection = fresh
            backoff = 0.1
            return fresh
        } catch {
            retryAt = .now() + backoff
            backoff = min(backoff * 2, 5)
            throw error
        }
    }
}

/// A connection that LISTENs on channels, on a thread of its own: it sleeps in `poll` on the
/// connection's socket and a pipe that `stop()` writes to, so it never busy-waits. When the
/// connection breaks it connects again with backoff (0.1 s doubling to 5 s) and calls
/// `onReconnect`, because notifications sent while it was away are lost: the caller should
/// look for work once.
final class PGListener: @unchecked Sendable {  // safe: the connection is confined to the thread; `stopped` is locked; the pipe's ends are set once in init
    private let conninfo: String
    private let channels: [String]
    private let onNotify: @Sendable (_ channel: String, _ payload: String) -> Void
    private let onReconnect: @Sendable () -> Void
    private let stopped = Locked(false)
    private let finished = DispatchSemaphore(value: 0)
    private var pipeEnds: [Int32] = [-1, -1]

    init(conninfo: String, channels: [String],
         onNotify: @escaping @Sendable (_ channel: String, _ payload: String) -> Void, onReconnect: @escaping @Sendable () -> Void) {
        self.conninfo = conninfo
        self.channels = channels
        self.onNotify = onNotify
        self.onReconnect = onReconnect
        _ = pipe(&pipeEnds)
        _ = fcntl(pipeEnds[0], F_SETFL, O_NONBLOCK)
    }

    deinit {
        close(pipeEnds[0])
        close(pipeEnds[1])
    }

    func start() {
        let thread = Thread { [self] in
            loop()
            finished.signal()
        }
        thread.name = "CurlQueuePostgres.listen"
        thread.start()
    }

    /// Stops the thread and waits for it to close its connection.
    func stop() {
        let already = stopped.withLock { value in
            defer { value = true }
            return value
        }
        guard !already else { return }
        var byte: UInt8 = 1
        _ = write(pipeEnds[1], &byte, 1)
        finished.wait()
    }

    private func loop() {
        var backoff = 0.1
        var first = true
        while !stopped.withLock({ $0 }) {
            do {
                let connection = try PGConnection(conninfo: conninfo)
                for channel in channels { try connection.query("LISTEN \(channel)") }
                backoff = 0.1
                if !first { onReconnect() }
                first = false
                while true {
                    var fds = [pollfd(fd: connection.socket, events: Int16(POLLIN), revents: 0),
                               pollfd(fd: pipeEnds[0], events: Int16(POLLIN), revents: 0)]
                    let ready = poll(&fds, 2, -1)
                    if ready < 0 && errno == EINTR { continue }
                    if fds[1].revents != 0 { return }
                    for notice in try connection.drainNotifications() { onNotify(notice.channel, notice.payload) }
                    if connection.isBroken { break }
                }
            } catch {
                first = false
            }
            // The wait for the next connect is a poll on the stop pipe: it ends early on stop().
            var fd = pollfd(fd: pipeEnds[0], events: Int16(POLLIN), revents: 0)
            if poll(&fd, 1, Int32(backoff * 1000)) > 0 { return }
            backoff = min(backoff * 2, 5)
        }
    }
}
