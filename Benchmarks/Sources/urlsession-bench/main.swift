// URLSession (FoundationNetworking, on libcurl) as a Swift user on Linux would use it: one
// session allowing C connections per host, C tasks in flight with completion handlers.
// --mode data (bodies in memory), stream (a data delegate that counts and discards), download
// (download tasks, each file moved to --out). HTTPS trust comes from the system store: the
// script runs this client with its CA bound over it in a private mount namespace, because
// FoundationNetworking on Linux has no option for a CA file.
import BenchSupport
import Dispatch
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

let workload = Workload()
let measurement = Measurement.start()
let counter = Counter()
let window = DispatchSemaphore(value: workload.concurrency)
let allDone = DispatchSemaphore(value: 0)
let total = Int64(workload.requests)
let shown = Counter()

func finished(ok: Bool, bytes: Int64, detail: @autoclosure () -> String) {
    if !ok, shown.add(done: 1) <= 3 { FileHandle.standardError.write(Data("urlsession-bench: \(detail())\n".utf8)) }
    window.signal()
    if counter.add(done: 1, errors: ok ? 0 : 1, bytes: bytes) == total { allDone.signal() }
}

func expected(_ size: Int64) -> Bool { workload.expectedBytes.map { Int64($0) == size } ?? true }

/// Counts streamed bytes per task and discards them.
final class StreamDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var received: [Int: Int64] = [:]

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        lock.lock()
        received[dataTask.taskIdentifier, default: 0] += Int64(data.count)
        lock.unlock()
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        lock.lock()
        let bytes = received.removeValue(forKey: task.taskIdentifier) ?? 0
        lock.unlock()
        let status = (task.response as? HTTPURLResponse)?.statusCode ?? 0
        finished(ok: error == nil && status == 200 && expected(bytes), bytes: bytes,
                 detail: "\(error.map { "\($0)" } ?? "status \(status), \(bytes) bytes")")
    }
}

let configuration = URLSessionConfiguration.default
configuration.httpMaximumConnectionsPerHost = workload.concurrency
configuration.urlCache = nil
configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
configuration.timeoutIntervalForRequest = 300
configuration.timeoutIntervalForResource = 600
let mode = workload.mode.isEmpty ? "data" : workload.mode
let streamDelegate = StreamDelegate()
let session = URLSession(
    configuration: configuration, delegate: mode == "stream" ? streamDelegate : nil, delegateQueue: nil)

for i in 0..<workload.requests {
    window.wait()
    let url = URL(string: workload.url(i))!
    switch mode {
    case "data":
        session.dataTask(with: url) { data, response, error in
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            let bytes = Int64(data?.count ?? 0)
            finished(ok: error == nil && status == 200 && expected(bytes), bytes: bytes,
                     detail: "\(error.map { "\($0)" } ?? "status \(status), \(bytes) bytes")")
        }.resume()
    case "stream":
        session.dataTask(with: url).resume()
    case "download":
        guard let path = workload.outPath(i) else { fail("--mode download needs --out") }
        session.downloadTask(with: url) { location, response, error in
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            var bytes: Int64 = -1
            if let location {
                try? FileManager.default.removeItem(atPath: path)
                if (try? FileManager.default.moveItem(at: location, to: URL(fileURLWithPath: path))) != nil {
                    bytes = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)??.int64Value ?? -1
                }
            }
            finished(ok: error == nil && status == 200 && expected(bytes), bytes: bytes,
                     detail: "\(error.map { "\($0)" } ?? "status \(status), \(bytes) bytes")")
        }.resume()
    default:
        fail("unknown --mode \(mode)")
    }
}
allDone.wait()
let (_, errors, bytes) = counter.snapshot()
measurement.finish(requests: workload.requests, errors: Int(errors), bytes: bytes)
