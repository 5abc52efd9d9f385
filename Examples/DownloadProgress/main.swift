// One transfer that reports its progress: a download to a file with a live progress line.
//
//     swift run DownloadProgress [URL]
//
// With no URL it starts a local server (127.0.0.1, random port) and downloads a slow 20 MB file.
import CurlQueue
import CurlQueueDemoServer
import Foundation

var server: DemoServer?
let url: URL
if let argument = CommandLine.arguments.dropFirst().first, let given = URL(string: argument) {
    url = given
} else {
    let local = try await DemoServer.start()
    server = local
    url = local.url("/bytes/20000000?drip=10&chunk=200000")
}

let destination = FileManager.default.temporaryDirectory.appendingPathComponent("curlqueue-progress-\(getpid())")
let operation = RequestOperation(request: Request(url: url, destination: destination, resume: true))
operation.downloadProgressHandler = { progress in
    let megabytes = Double(progress.bytesTransferred) / 1_000_000
    if let fraction = progress.fraction {
        let filled = Int(fraction * 30)
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: 30 - filled)
        show(String(format: "\r[%@] %5.1f%%  %.1f MB", bar, fraction * 100, megabytes))
    } else {
        show(String(format: "\r%.1f MB (size unknown)", megabytes))
    }
}

/// Writes to the terminal at once, without a line break.
func show(_ text: String) {
    FileHandle.standardOutput.write(Data(text.utf8))
}

do {
    let response = try await operation.response()
    print("\nHTTP \(response.status.code): \(response.fileURL?.path ?? "in memory") after \(response.metrics.total)")
} catch {
    print("\nfailed: \(error)")
}
try? FileManager.default.removeItem(at: destination)
try await server?.shutdown()
