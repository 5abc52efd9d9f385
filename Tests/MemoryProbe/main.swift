// A test helper: runs one transfer with CurlQueue and prints the process's peak RSS in bytes,
// so a test can bound memory without other tests' allocations in the same process.
//
//   MemoryProbe URL DESTINATION         download URL to a file
//   MemoryProbe --upload URL FILE       PUT a segmented body: a few bytes, FILE, a few bytes
//   MemoryProbe --stream URL            stream the response body, counting and dropping it
//   MemoryProbe --stream-upload URL SIZE
//                                       PUT SIZE bytes as a streamed body of unknown length
//   MemoryProbe --stalled-resolve cancel|timeout ADDRESS URL
//                                       a name whose resolver never answers (run in a mount
//                                       namespace whose resolv.conf names ADDRESS, a loopback
//                                       address this mode binds and never answers): once the query arrived, the
//                                       transfer is cancelled (or its 1 s connect limit fires) and
//                                       a request to URL must go through the engine meanwhile
import CurlQueue
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A UDP socket on `address`:53 that takes DNS queries and never answers; nil when it cannot
/// be bound (port 53 needs root).
func blackholeResolver(at address: String) -> Int32? {
    let host = address
    let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(53).bigEndian
    address.sin_addr.s_addr = inet_addr(host)
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
    return bound ? fd : nil
}

/// Waits (on a thread of its own) for the first query to reach `resolver`: the event that the
/// transfer is resolving. False after 10 s without one.
func queryArrived(at resolver: Int32) async -> Bool {
    await withCheckedContinuation { continuation in
        Thread {
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(resolver, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var buffer = [UInt8](repeating: 0, count: 512)
            continuation.resume(returning: recv(resolver, &buffer, buffer.count, 0) > 0)
        }.start()
    }
}

func seconds(since start: ContinuousClock.Instant) -> String {
    let elapsed = ContinuousClock.now - start
    return String(format: "%.3f", Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
}

func peakRSS() -> Int {
    let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    let peak = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }?
        .split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
    return peak * 1024
}

/// The `--stalled-resolve` mode: in a function, so that what it made is let go of before the
/// process ends (LeakSanitizer checks at exit).
func stalledResolve(mode: String, resolver: Int32, nameserver: String, unrelated url: URL) async throws {
    var request = Request(url: URL(string: "http://stalled.example/never")!)
    if mode == "timeout" { request.timeouts.connect = .seconds(1) }
    let stalled = RequestOperation(request: request)
    let started = ContinuousClock.now
    async let outcome = stalled.response()
    guard await queryArrived(at: resolver) else {
        print("error=no DNS query reached \(nameserver)")
        exit(1)
    }
    if mode == "cancel" { stalled.cancel() }
    let unrelatedStart = ContinuousClock.now
    let unrelated = try await RequestOperation(request: Request(url: url)).response()
    print("unrelated=\(unrelated.status.code) unrelatedSeconds=\(seconds(since: unrelatedStart))")
    do {
        _ = try await outcome
        print("stalled=success")
    } catch {
        print("stalled=\(error) stalledSeconds=\(seconds(since: started))")
    }
}

let arguments = CommandLine.arguments
do {
    switch (arguments.count, arguments.dropFirst().first) {
    case (4, "--upload"):
        guard let url = URL(string: arguments[2]) else { exit(2) }
        let body = Request.Body.segments([.bytes(Data("head".utf8)), .file(URL(fileURLWithPath: arguments[3])), .bytes(Data("tail".utf8))])
        let response = try await RequestOperation(request: Request(url: url, method: .put, body: body)).response()
        print("status=\(response.status.code) sent=\(response.metrics.bytesSent) peak=\(peakRSS())")
    case (3, "--stream"):
        guard let url = URL(string: arguments[2]) else { exit(2) }
        let response = try await RequestQueue().stream(Request(url: url))
        var received = 0
        for try await chunk in response.body { received += chunk.count }
        print("status=\(response.status.code) received=\(received) peak=\(peakRSS())")
    case (4, "--stream-upload"):
        // A body of SIZE bytes of unknown length (chunked), 64 KiB chunks of one shared buffer
        // made as the operation asks for them; the rate from the start to the response.
        guard let url = URL(string: arguments[2]), let size = Int(arguments[3]) else { exit(2) }
        let chunk = [UInt8](repeating: 0x5A, count: 64 << 10)
        let chunks = AsyncStream<ArraySlice<UInt8>>(unfolding: { [left = Locked(size)] in
            let count = left.withLock { left -> Int in
                defer { left -= Swift.min(left, chunk.count) }
                return Swift.min(left, chunk.count)
            }
            return count > 0 ? chunk.prefix(count) : nil
        })
        let start = ContinuousClock.now
        let request = Request(url: url, method: .put, body: .stream(RequestBodyStream(length: nil, chunks)))
        let response = try await RequestOperation(request: request).response()
        print("status=\(response.status.code) sent=\(response.metrics.bytesSent) seconds=\(seconds(since: start)) peak=\(peakRSS())")
    case (5, "--stalled-resolve"):
        guard let url = URL(string: arguments[4]), let resolver = blackholeResolver(at: arguments[3]) else { exit(2) }
        try await stalledResolve(mode: arguments[2], resolver: resolver, nameserver: arguments[3], unrelated: url)
    case (3, _):
        guard let url = URL(string: arguments[1]) else { exit(2) }
        let request = Request(url: url, destination: URL(fileURLWithPath: arguments[2]))
        let response = try await RequestOperation(request: request).response()
        print("status=\(response.status.code) peak=\(peakRSS())")
    default:
        FileHandle.standardError.write(Data("usage: MemoryProbe URL DESTINATION | --upload URL FILE | --stream URL | --stream-upload URL SIZE | --stalled-resolve cancel|timeout ADDRESS URL\n".utf8))
        exit(2)
    }
} catch {
    print("error=\(error)")
    exit(1)
}
