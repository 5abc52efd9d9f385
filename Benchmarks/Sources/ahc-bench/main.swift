// swift-server/async-http-client as a Swift server developer would use it: one HTTPClient on
// the shared event loop group, C tasks each running requests one after another.
// --mode data (bodies collected), stream (body chunks counted and dropped), download
// (FileDownloadDelegate writes each body to --out).
import AsyncHTTPClient
import BenchSupport
import Foundation
import NIOCore
import NIOSSL

let workload = Workload()
let measurement = Measurement.start()
let mode = workload.mode.isEmpty ? "data" : workload.mode

var configuration = HTTPClient.Configuration()
configuration.connectionPool = .init(
    idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: workload.concurrency)
configuration.httpVersion = .automatic
configuration.timeout = .init(connect: .seconds(30), read: .seconds(300))
if let ca = workload.caFile {
    var tls = TLSConfiguration.makeClientConfiguration()
    tls.trustRoots = .file(ca)
    configuration.tlsConfiguration = tls
}
let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
let indices = Counter()
let shown = Counter()

func expected(_ size: Int64) -> Bool { workload.expectedBytes.map { Int64($0) == size } ?? true }

/// One request: (ok, bytes).
func fetch(_ i: Int) async -> (Bool, Int64) {
    do {
        switch mode {
        case "data", "stream":
            let request = HTTPClientRequest(url: workload.url(i))
            let response = try await client.execute(request, timeout: .seconds(600))
            var bytes: Int64 = 0
            if mode == "data" {
                bytes = Int64(try await response.body.collect(upTo: 1 << 30).readableBytes)
            } else {
                for try await chunk in response.body { bytes += Int64(chunk.readableBytes) }
            }
            let ok = response.status == .ok && expected(bytes)
            if !ok, shown.add(done: 1) <= 3 { print("ahc-bench: status \(response.status), \(bytes) bytes", to: &standardError) }
            return (ok, bytes)
        case "download":
            guard let path = workload.outPath(i) else { fail("--mode download needs --out") }
            let delegate = try FileDownloadDelegate(path: path)
            let request = try HTTPClient.Request(url: workload.url(i))
            let progress = try await client.execute(request: request, delegate: delegate).get()
            let bytes = Int64(progress.receivedBytes)
            let ok = progress.head.status == .ok && expected(bytes)
            if !ok, shown.add(done: 1) <= 3 { print("ahc-bench: status \(progress.head.status), \(bytes) bytes", to: &standardError) }
            return (ok, bytes)
        default:
            fail("unknown --mode \(mode)")
        }
    } catch {
        if shown.add(done: 1) <= 3 { print("ahc-bench: \(error)", to: &standardError) }
        return (false, 0)
    }
}

struct StandardError: TextOutputStream {
    mutating func write(_ string: String) { FileHandle.standardError.write(Data(string.utf8)) }
}
nonisolated(unsafe) var standardError = StandardError()

let (errors, bytes) = await withTaskGroup(of: (Int64, Int64).self) { group in
    for _ in 0..<min(workload.concurrency, workload.requests) {
        group.addTask {
            var errors: Int64 = 0
            var bytes: Int64 = 0
            while let i = indices.next(below: workload.requests) {
                let (ok, size) = await fetch(i)
                if !ok { errors += 1 }
                bytes += size
            }
            return (errors, bytes)
        }
    }
    var errors: Int64 = 0
    var bytes: Int64 = 0
    for await (e, b) in group {
        errors += e
        bytes += b
    }
    return (errors, bytes)
}
try await client.shutdown().get()
measurement.finish(requests: workload.requests, errors: Int(errors), bytes: bytes)
