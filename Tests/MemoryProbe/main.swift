// A test helper: runs one transfer with CurlQueue and prints the process's peak RSS in bytes,
// so a test can bound memory without other tests' allocations in the same process.
//
//   MemoryProbe URL DESTINATION         download URL to a file
//   MemoryProbe --upload URL FILE       PUT a segmented body: a few bytes, FILE, a few bytes
//   MemoryProbe --stream URL            stream the response body, counting and dropping it
import CurlQueue
import Foundation

func peakRSS() -> Int {
    let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    let peak = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }?
        .split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
    return peak * 1024
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
    case (3, _):
        guard let url = URL(string: arguments[1]) else { exit(2) }
        let request = Request(url: url, destination: URL(fileURLWithPath: arguments[2]))
        let response = try await RequestOperation(request: request).response()
        print("status=\(response.status.code) peak=\(peakRSS())")
    default:
        FileHandle.standardError.write(Data("usage: MemoryProbe URL DESTINATION | --upload URL FILE | --stream URL\n".utf8))
        exit(2)
    }
} catch {
    print("error=\(error)")
    exit(1)
}
