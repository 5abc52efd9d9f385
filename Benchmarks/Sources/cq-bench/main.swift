// CurlQueue's benchmark client. Modes:
//   handler         RequestQueue(maxConcurrentRequestCount: C), every request added up front with
//                   a completion handler
//   async           the same queue, `try await queue.response(for:)` from a task group
//   batch           the same queue, one task iterating `queue.responses(for: requests)`
//   sched-cancel    no network: add N operations to a suspended queue, cancel them all
//   sched-fifo      no network: N operations of one priority run through a queue of 1 slot
//   sched-priority  the same with random priorities; checks they complete in priority order
// With --same-url every request is equal to every other, and the queue allows duplicates
// (`allowDuplicateRequests`): the cost of many equal requests against distinct ones.
// Bodies go to files when --out names a folder; else bodies of 1 MiB or more are discarded
// (`Request.discardsBody`: counted, not kept), like the C baseline's counting write callback,
// unless --keep-bodies keeps every body in memory. A body kept in memory larger than
// `Request.maxInMemoryBodySize`'s default (64 MiB; --expect says how large) gets the limit it
// needs, and the client says so on stderr: the default stays as it is for everyone else.
import BenchSupport
import CurlQueue
import Dispatch
import Foundation

bootstrapBenchMetricsIfAsked()
bootstrapBenchTracingIfAsked()
let workload = Workload()
let measurement = Measurement.start()
let errorsShown = Counter()
/// The in-memory limit that bodies kept in memory need, when the default is too small: the
/// size --expect gives, or none (nil) for bodies kept with --keep-bodies and no --expect.
let inMemoryLimit: (needed: Bool, limit: Int64?) = {
    guard workload.outDirectory == nil, workload.keepBodies || (workload.expectedBytes ?? 0) < 1 << 20 else { return (false, nil) }
    let expected = workload.expectedBytes.map { Int64($0) }
    if let expected, expected <= Request.defaultMaxInMemoryBodySize { return (false, nil) }
    if expected == nil, !workload.keepBodies { return (false, nil) }
    let said = expected.map { "\($0) bytes" } ?? "no limit"
    FileHandle.standardError.write(Data(
        "cq-bench: bodies kept in memory: Request.maxInMemoryBodySize set to \(said) (default \(Request.defaultMaxInMemoryBodySize) bytes)\n".utf8))
    return (true, expected)
}()

func makeRequest(_ i: Int) -> Request {
    var request = Request(string: workload.url(i))
    if let ca = workload.caFile { request.tls.caFile = ca }
    if let path = workload.outPath(i) {
        request.destination = URL(fileURLWithPath: path)
    } else if inMemoryLimit.needed {
        request.maxInMemoryBodySize = inMemoryLimit.limit
    } else if !workload.keepBodies, (workload.expectedBytes ?? 0) >= 1 << 20 {
        request.discardsBody = true
    }
    return request
}

/// Counts one outcome: (errors, bytes).
func check(_ result: Result<Response, RequestError>) -> (Int64, Int64) {
    switch result {
    case .success(let response):
        var size = max(Int64(response.body.count), response.metrics.bytesReceived)
        if let file = response.fileURL {
            size = (try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? NSNumber)??.int64Value ?? -1
        }
        let ok = response.status.code == 200 && (workload.expectedBytes.map { Int64($0) == size } ?? true)
        if !ok, errorsShown.add(done: 1) <= 3 {
            FileHandle.standardError.write(Data("cq-bench: status \(response.status.code), \(size) bytes\n".utf8))
        }
        return (ok ? 0 : 1, size)
    case .failure(let error):
        if errorsShown.add(done: 1) <= 3 { FileHandle.standardError.write(Data("cq-bench: \(error)\n".utf8)) }
        return (1, 0)
    }
}
switch workload.mode {
case "handler":
    let counter = Counter()
    let done = DispatchSemaphore(value: 0)
    let queue = RequestQueue(maxConcurrentRequestCount: workload.concurrency)
    queue.allowDuplicateRequests = workload.sameURL
    let total = Int64(workload.requests)
    for i in 0..<workload.requests {
        queue.add(makeRequest(i)) { result in
            let (errors, bytes) = check(result)
            if counter.add(done: 1, errors: errors, bytes: bytes) == total { done.signal() }
        }
    }
    done.wait()
    let (_, errors, bytes) = counter.snapshot()
    measurement.finish(requests: workload.requests, errors: Int(errors), bytes: bytes)

case "async":
    let queue = RequestQueue(maxConcurrentRequestCount: workload.concurrency)
    queue.allowDuplicateRequests = workload.sameURL
    let (errors, bytes) = await withTaskGroup(of: (Int64, Int64).self) { group in
        for i in 0..<workload.requests {
            let request = makeRequest(i)
            group.addTask {
                do throws(RequestError) {
                    return check(.success(try await queue.response(for: request)))
                } catch {
                    return check(.failure(error))
                }
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
    measurement.finish(requests: workload.requests, errors: Int(errors), bytes: bytes)

case "batch":
    let queue = RequestQueue(maxConcurrentRequestCount: workload.concurrency)
    queue.allowDuplicateRequests = workload.sameURL
    var errors: Int64 = 0
    var bytes: Int64 = 0
    for await outcome in queue.responses(for: (0..<workload.requests).lazy.map(makeRequest)) {
        let (e, b) = check(outcome.result)
        errors += e
        bytes += b
    }
    measurement.finish(requests: workload.requests, errors: Int(errors), bytes: bytes)

case "sched-cancel":
    // Memory per pending operation: resident memory before and after the adds (the URLs are
    // distinct, as real ones would be, and each operation has a completion handler).
    let requests = (0..<workload.requests).map(makeRequest)
    let counter = Counter()
    let done = DispatchSemaphore(value: 0)
    let queue = RequestQueue(maxConcurrentRequestCount: 8)
    queue.allowDuplicateRequests = workload.sameURL
    queue.isSuspended = true
    let rssBefore = procStatusKiB("VmRSS")
    let t0 = now()
    let total = Int64(workload.requests)
    for request in requests {
        queue.add(request) { result in
            var cancelled = false
            if case .failure(.cancelled) = result { cancelled = true }
            if counter.add(done: 1, errors: cancelled ? 0 : 1) == total { done.signal() }
        }
    }
    let t1 = now()
    let rssAfter = procStatusKiB("VmRSS")
    queue.cancelAllRequests()
    let t2 = now()
    done.wait()
    let t3 = now()
    let (_, errors, _) = counter.snapshot()
    measurement.finish(
        requests: workload.requests, errors: Int(errors) + (queue.requestCount == 0 ? 0 : 1), bytes: 0,
        extra: [
            "add_seconds": t1 - t0, "cancel_seconds": t2 - t1, "handlers_seconds": t3 - t2,
            "add_cancel_seconds": t3 - t0,
            "bytes_per_pending_op": Double(rssAfter - rssBefore) * 1024 / Double(max(1, workload.requests)),
        ])

case "sched-fifo", "sched-priority":
    // No network: the requests' scheme is not allowed, so the engine ends each one with
    // `invalidRequest` as soon as it takes it. One slot: each operation starts when the one
    // before it finished (on the engine thread), so the order is the queue's order.
    let mixed = workload.mode == "sched-priority"
    var generator = SystemRandomNumberGenerator()
    let operations = (0..<workload.requests).map { i -> RequestOperation in
        var request = makeRequest(i)
        request.allowedSchemes = ["none"]
        let operation = RequestOperation(request: request)
        if mixed { operation.priority = RequestOperation.Priority.allCases.randomElement(using: &generator)! }
        return operation
    }
    let order = OrderCheck()
    let done = DispatchSemaphore(value: 0)
    let queue = RequestQueue(maxConcurrentRequestCount: 1)
    queue.allowDuplicateRequests = workload.sameURL
    queue.isSuspended = true
    let t0 = now()
    let total = workload.requests
    for operation in operations {
        let priority = operation.priority.rawValue
        operation.completionHandler = { _ in
            if order.record(priority) == total { done.signal() }
        }
        try! queue.add(operation)
    }
    let t1 = now()
    queue.isSuspended = false
    done.wait()
    let t2 = now()
    // The first operation may start before the others are added only if the queue is not
    // suspended; it is, so every completion must come in non-increasing priority.
    measurement.finish(
        requests: workload.requests, errors: order.outOfOrder, bytes: 0,
        extra: ["add_seconds": t1 - t0, "run_seconds": t2 - t1, "out_of_order": order.outOfOrder])

default:
    fail("unknown --mode \(workload.mode)")
}

/// Completion order, checked as it comes (completion handlers run on one serial queue).
final class OrderCheck: @unchecked Sendable {
    private let lock = NSLock()
    private var last = Int.max
    private var count = 0
    private(set) var outOfOrder = 0

    func record(_ priority: Int) -> Int {
        lock.lock()
        defer { lock.unlock() }
        if priority > last { outOfOrder += 1 }
        last = priority
        count += 1
        return count
    }
}
