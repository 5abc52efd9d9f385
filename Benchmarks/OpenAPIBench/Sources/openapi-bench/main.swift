// One benchmark run of a generated OpenAPI client (Tests/OpenAPIFixtureClient) over one
// transport, against the fixture server (Tests/OpenAPIFixture) at --url. Prints one JSON line:
// calls, seconds, user+sys CPU seconds, peak RSS (VmHWM), bytes, errors.
//
//   openapi-bench --transport cq|ahc|urlsession --mode json|stream --url URL
//                 [--concurrency C] [--count N] [--size BYTES]
//
// json: N getItem calls (path, query and header parameters, a small JSON body), C tasks at once.
// stream: one download of --size bytes, read chunk by chunk and dropped.
// upload: one uploadBlob of --size bytes, a body of unknown length made of 64 KiB chunks as the
// transport asks for them (one buffer, shared: no copy per chunk on this side).
import AsyncHTTPClient
import CurlQueue
import CurlQueueOpenAPI
import Foundation
import OpenAPIAsyncHTTPClient
import OpenAPIFixtureClient
import OpenAPIRuntime
import OpenAPIURLSession
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

func argument(_ name: String) -> String? {
    let arguments = CommandLine.arguments
    guard let i = arguments.firstIndex(of: "--\(name)"), i + 1 < arguments.count else { return nil }
    return arguments[i + 1]
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("openapi-bench: \(message)\n".utf8))
    exit(2)
}

func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
        + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

func peakRSSKiB() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
    }
    return 0
}

guard let transportName = argument("transport") else { fail("--transport cq|ahc|urlsession") }
let mode = argument("mode") ?? "json"
guard let serverURL = argument("url").flatMap({ URL(string: $0) }) else { fail("--url") }
let concurrency = Int(argument("concurrency") ?? "1")!
let count = Int(argument("count") ?? "1000")!
let size = Int64(argument("size") ?? "\(256 << 20)")!

let transport: any ClientTransport
switch transportName {
case "cq":
    transport = CurlQueueTransport(maxConcurrentRequestCount: max(concurrency, 1))
case "ahc":
    var configuration = HTTPClient.Configuration()
    configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: max(concurrency, 1))
    let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    transport = AsyncHTTPClientTransport(configuration: .init(client: client, timeout: .minutes(10)))
case "urlsession":
    let configuration = URLSessionConfiguration.default
    configuration.httpMaximumConnectionsPerHost = max(concurrency, 1)
    transport = URLSessionTransport(configuration: .init(session: URLSession(configuration: configuration)))
default:
    fail("unknown --transport \(transportName)")
}
let client = Client(serverURL: serverURL, transport: transport)

/// Claims call indices for the worker tasks.
final class Counter: @unchecked Sendable {  // a lock guards `value`
    private let lock = NSLock()
    private var value = 0
    func next() -> Int { lock.lock(); defer { lock.unlock() }; value += 1; return value - 1 }
}

/// `size` bytes in 64 KiB chunks of one shared buffer.
struct UploadChunks: AsyncSequence, Sendable {
    typealias Element = ArraySlice<UInt8>
    static let chunk = ArraySlice([UInt8](repeating: 0x5A, count: 64 << 10))
    let size: Int64

    func makeAsyncIterator() -> Iterator { Iterator(left: size) }

    struct Iterator: AsyncIteratorProtocol {
        var left: Int64
        mutating func next() async -> ArraySlice<UInt8>? {
            guard left > 0 else { return nil }
            let count = Int(Swift.min(left, Int64(UploadChunks.chunk.count)))
            left -= Int64(count)
            return UploadChunks.chunk.prefix(count)
        }
    }
}

let cpuStart = cpuSeconds()
let start = ContinuousClock.now
var calls = 0
var errors = 0
var bytes: Int64 = 0
switch mode {
case "json":
    let indices = Counter()
    let results = await withTaskGroup(of: (Int, Int).self) { group in
        for _ in 0..<concurrency {
            group.addTask {
                var (done, failed) = (0, 0)
                while indices.next() < count {
                    do {
                        let response = try await client.getItem(
                            path: .init(itemID: 7), query: .init(verbose: true), headers: .init(xRequestTag: "bench"))
                        if case .ok(let ok) = response, try ok.body.json.id == 7 { done += 1 } else { failed += 1 }
                    } catch {
                        failed += 1
                        if failed <= 3 { FileHandle.standardError.write(Data("openapi-bench: \(error)\n".utf8)) }
                    }
                }
                return (done, failed)
            }
        }
        var total = (0, 0)
        for await (done, failed) in group { total.0 += done; total.1 += failed }
        return total
    }
    (calls, errors) = results
case "stream":
    do {
        let response = try await client.download(query: .init(size: size))
        guard case .ok(let ok) = response else { fail("download: \(response)") }
        for try await chunk in try ok.body.binary { bytes += Int64(chunk.count) }
        calls = 1
        errors = bytes == size ? 0 : 1
    } catch {
        fail("download: \(error)")
    }
case "upload":
    do {
        let response = try await client.uploadBlob(
            path: .init(name: "bench"), body: .binary(HTTPBody(UploadChunks(size: size), length: .unknown, iterationBehavior: .single)))
        guard case .ok(let ok) = response else { fail("upload: \(response)") }
        bytes = try ok.body.json.bytes
        calls = 1
        errors = bytes == size ? 0 : 1
    } catch {
        fail("upload: \(error)")
    }
default:
    fail("unknown --mode \(mode)")
}
let seconds = (ContinuousClock.now - start) / .seconds(1)
let cpu = cpuSeconds() - cpuStart
print(#"{"transport":"\#(transportName)","mode":"\#(mode)","concurrency":\#(concurrency),"calls":\#(calls),"errors":\#(errors),"seconds":\#(seconds),"cpu":\#(cpu),"bytes":\#(bytes),"peakRSSKiB":\#(peakRSSKiB())}"#)
exit(errors == 0 ? 0 : 1)
