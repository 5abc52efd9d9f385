// A daemon with two queues on one engine: a low-priority queue for bulk work, two at a time,
// and a high-priority queue whose requests never wait behind the bulk. Both share the
// engine's connections.
//
//     swift run PriorityDaemon
//
// It starts a local server (127.0.0.1, random port) to talk to.
import CurlQueue
import CurlQueueDemoServer
import Foundation

let server = try await DemoServer.start()
let bulk = RequestQueue(maxConcurrentRequestCount: 2)
let urgent = RequestQueue(maxConcurrentRequestCount: 8)
let start = ContinuousClock.now

func log(_ text: String) {
    let elapsed = ContinuousClock.now - start
    print(String(format: "%6.2fs  ", Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18) + text)
}

// A backlog of slow bulk transfers: the low-priority work of the daemon.
for index in 0..<12 {
    let request = Request(url: server.url("/bytes/200000?drip=25&chunk=20000&job=\(index)"))
    bulk.add(request) { result in log("bulk   #\(index) \(result.isSuccess ? "done" : "failed")") }
}

// Within one queue, priorities reorder the backlog: this one jumps ahead of the other bulk jobs.
let important = RequestOperation(request: Request(url: server.url("/bytes/1000?job=important")))
important.priority = .high
important.completionHandler = { _ in log("bulk   important job done (queued last, priority high)") }
try bulk.add(important)

// Urgent requests arrive while the bulk queue is busy: they run at once on their own queue.
for index in 0..<3 {
    try await Task.sleep(for: .milliseconds(300))
    let response = try await urgent.response(for: Request(url: server.url("/echo?urgent=\(index)")))
    log("urgent #\(index) HTTP \(response.status.code) in \(response.metrics.total) while bulk has \(bulk.requestCount) queued")
}

await bulk.waitUntilAllOperationsAreFinished()
log("all bulk work done; server saw at most \(server.peakConcurrency) requests at once")
try await server.shutdown()

extension Result {
    var isSuccess: Bool { if case .success = self { true } else { false } }
}
