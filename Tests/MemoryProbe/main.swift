// A test helper: downloads one URL to a file with CurlQueue and prints the process's peak RSS
// in bytes, so a test can bound memory without other tests' allocations in the same process.
import CurlQueue
import Foundation

let arguments = CommandLine.arguments
guard arguments.count == 3, let url = URL(string: arguments[1]) else {
    FileHandle.standardError.write(Data("usage: MemoryProbe URL DESTINATION\n".utf8))
    exit(2)
}
let request = Request(url: url, destination: URL(fileURLWithPath: arguments[2]))
do {
    let response = try await RequestOperation(request: request).response()
    let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    let peak = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }?
        .split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
    print("status=\(response.status.code) peak=\(peak * 1024)")
} catch {
    print("error=\(error)")
    exit(1)
}
