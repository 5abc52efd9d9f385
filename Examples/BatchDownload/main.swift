// A batch download: many files through one RequestQueue, four at a time, each written to disk
// under its final name only once complete, their outcomes taken by one task as they come.
//
//     swift run BatchDownload [URL ...]
//
// With no URLs it starts a local server (127.0.0.1, random port) with generated files, some
// slow, one that fails once, one missing, and downloads those.
import CurlQueue
import CurlQueueDemoServer
import Foundation

var urls = CommandLine.arguments.dropFirst().compactMap(URL.init(string:))
var server: DemoServer?
if urls.isEmpty {
    let local = try await DemoServer.start()
    server = local
    urls = [
        "/bytes/5000000", "/bytes/2000000?drip=20&chunk=100000", "/bytes/300000?chunked=1",
        "/flaky/unlucky?failures=1&mode=close&bytes=100000", "/status/404", "/bytes/1000000",
        "/bytes/64000?delay=300", "/bytes/8000000",
    ].map { local.url($0) }
    print("serving test files at \(local.baseURL)")
}

let folder = FileManager.default.temporaryDirectory.appendingPathComponent("curlqueue-batch-\(getpid())")
try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)

let queue = RequestQueue(maxConcurrentRequestCount: 4)
let names = urls.enumerated().map { index, url in
    "\(index)-" + (url.lastPathComponent.isEmpty ? "index.html" : url.lastPathComponent)
}
let operations = zip(urls, names).map { url, name in
    let operation = RequestOperation(request: Request(url: url, destination: folder.appendingPathComponent(name)))
    operation.autoRetry = true
    return operation
}

// One task takes every outcome, in the order the downloads finish.
for await outcome in queue.responses(for: operations) {
    let name = names[outcome.index]
    switch outcome.result {
    case .success(let response) where response.fileURL != nil:
        print("done    \(name): \(response.metrics.bytesReceived) bytes in \(response.metrics.total), \(response.attempts) attempt(s)")
    case .success(let response):
        print("failed  \(name): HTTP \(response.status.code)")
    case .failure(let error):
        print("failed  \(name): \(error)")
    }
}

let files = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
print("\(files.count) of \(urls.count) files in \(folder.path)")
try await server?.shutdown()
