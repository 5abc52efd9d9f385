// A test helper: the soak run, in a process of its own so that its file descriptors, threads
// and memory can be measured without the other tests' (SoakTests.swift launches it).
//
//     Soak BASE_URL REQUESTS FOLDER
//
// BASE_URL is a fixture server (Tests/CurlQueueTestSupport). REQUESTS operations go through two
// queues (32 + 32 slots, random priorities) with about 10% faults and about 3% cancelled from
// other threads at random moments. Every outcome is checked against what its route must give;
// every successful body against the fixture's byte pattern. Before and after, the process is
// brought to the same quiet state (one TCP connection left: the server closes the others,
// libcurl drops them) and its file descriptors, threads and resident memory are measured. Prints one JSON
// object; the test asserts on it. Exits 0 whatever the results, 2 on a usage error.
import CurlQueue
import CurlQueueTestSupport
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What one operation is sent to do, and what it must end with.
enum Kind: String, CaseIterable, Codable {
    /// `/bytes/N` (sometimes chunked): 200 and exactly the pattern's first N bytes.
    case body
    /// `/bytes/N` to a destination file: the file holds exactly the pattern's N bytes.
    case download
    /// `/flaky/ID?failures=1&mode=close` with autoRetry: "ok ID" at the second attempt.
    case closeThenOK
    /// `/flaky/ID?failures=1&mode=reset` with autoRetry: "ok ID" at the second attempt.
    case resetThenOK
    /// `/flaky/ID?failures=1&mode=closeMidBody&bytes=N` with autoRetry: the N pattern bytes at
    /// the second attempt.
    case midBodyCloseThenOK
    /// `/status/503`: a 503 response (statuses are not retried by default).
    case status503
    /// `/bytes/N?closeAfter=K` without retry: transport failure `partialFile`.
    case cutShort
    /// `/bytes/100000?stallAfter=1000` with a 1 s idle limit: `.timedOut`, code 28.
    case stall
}

struct Counts: Codable {
    var ok = 0
    var expectedFailures = 0
    var cancelled = 0
    /// Downloads that completed `.cancelled` with the whole file already under its final name
    /// (the cancel came after the rename, before the outcome was handed over).
    var cancelledComplete = 0
    var unexpected = 0
}

struct Measure: Codable {
    var fds: Int
    var fdList: [String]
    var threads: Int
    /// Resident memory as it is.
    var rssBytes: Int
    /// Resident memory once malloc has given its free pages back (`malloc_trim(0)`).
    var trimmedRSSBytes: Int
}

struct Report: Codable {
    var requests: Int
    var completions: Int
    var operationsCompletedTwiceOrMore: Int
    var operationsNeverCompleted: Int
    var byKind: [String: Counts]
    var unexpectedExamples: [String]
    var bodyBytesVerified: Int
    var cancelsSent: Int
    var seconds: Double
    var baseline: Measure
    var after: Measure
    var peakRSSBytes: Int
    var quietStateAttempts: Int
    /// When the quiet state was not reached: the sockets left (`tcpSocketLines()`).
    var leftSockets: [String]
}

/// Shared bookkeeping; every field under `lock`.
final class Ledger: @unchecked Sendable {  // safe: all state is touched under `lock`
    let lock = NSLock()
    var calls: [UInt8]
    var byKind: [Kind: Counts] = [:]
    var examples: [String] = []
    var bytesVerified = 0
    var live: [Int: RequestOperation] = [:]
    var cancelCandidates: [Int] = []
    var cancelsSent = 0
    var finished = false

    init(count: Int) { calls = [UInt8](repeating: 0, count: count) }

    func record(_ index: Int, kind: Kind, _ outcome: Outcome, bytes: Int) -> RequestOperation? {
        lock.withLock {
            calls[index] = calls[index] &+ 1
            bytesVerified += bytes
            switch outcome {
            case .ok: byKind[kind, default: Counts()].ok += 1
            case .expectedFailure: byKind[kind, default: Counts()].expectedFailures += 1
            case .cancelled: byKind[kind, default: Counts()].cancelled += 1
            case .cancelledComplete:
                byKind[kind, default: Counts()].cancelled += 1
                byKind[kind, default: Counts()].cancelledComplete += 1
            case .unexpected(let what):
                byKind[kind, default: Counts()].unexpected += 1
                if examples.count < 20 { examples.append("#\(index) \(kind): \(what)") }
            }
            return live.removeValue(forKey: index)
        }
    }
}

enum Outcome {
    case ok, expectedFailure, cancelled, cancelledComplete
    case unexpected(String)
}

// MARK: - The plan of one operation

struct Plan {
    var kind: Kind
    var request: Request
    var autoRetry: Bool
    var size: Int
    var id: String
    var cancel: Bool
    var priority: RequestOperation.Priority
    var queue: Int
}

/// A small deterministic generator (SplitMix64), so a run can be repeated.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

let maxBodySize = 200_000
/// Operations added and not yet completed, at most.
let windowSize = 1000

func plan(_ index: Int, phase: String, base: String, folder: URL, rng: inout SplitMix) -> Plan {
    let roll = Int.random(in: 0..<1000, using: &rng)
    let kind: Kind
    switch roll {
    case 0..<20: kind = .closeThenOK
    case 20..<40: kind = .resetThenOK
    case 40..<55: kind = .midBodyCloseThenOK
    case 55..<75: kind = .status503
    case 75..<95: kind = .cutShort
    case 95..<100: kind = .stall
    case 100..<130: kind = .download
    default: kind = .body
    }
    // Mostly small bodies, now and then a large one.
    let size = Int.random(in: 0..<20, using: &rng) == 0
        ? Int.random(in: 0...maxBodySize, using: &rng) : Int.random(in: 0...16_384, using: &rng)
    let id = "\(phase)\(index)"
    var path: String
    var autoRetry = false
    var destination: URL?
    var idle: Duration?
    switch kind {
    case .body:
        let chunked = Bool.random(using: &rng) ? "&chunked=1" : ""
        path = "/bytes/\(size)?i=\(id)\(chunked)&chunk=\(Int.random(in: 1000...65536, using: &rng))"
    case .download:
        path = "/bytes/\(size)?i=\(id)"
        destination = folder.appendingPathComponent(id)
    case .closeThenOK:
        path = "/flaky/\(id)?failures=1&mode=close"
        autoRetry = true
    case .resetThenOK:
        path = "/flaky/\(id)?failures=1&mode=reset"
        autoRetry = true
    case .midBodyCloseThenOK:
        path = "/flaky/\(id)?failures=1&mode=closeMidBody&bytes=\(max(2, size))"
        autoRetry = true
    case .status503:
        path = "/status/503?i=\(id)"
        autoRetry = true  // no status is retried by default: the 503 is the answer
    case .cutShort:
        path = "/bytes/\(max(2, size))?i=\(id)&closeAfter=\(max(2, size) / 2)"
    case .stall:
        path = "/bytes/100000?i=\(id)&stallAfter=1000"
        idle = .seconds(1)
    }
    var request = Request(url: URL(string: base + path)!, destination: destination)
    request.timeouts.idle = idle
    return Plan(
        kind: kind, request: request, autoRetry: autoRetry,
        size: kind == .midBodyCloseThenOK ? max(2, size) : size, id: id,
        cancel: Int.random(in: 0..<100, using: &rng) < 3,
        priority: RequestOperation.Priority.allCases.randomElement(using: &rng)!,
        queue: Int.random(in: 0..<2, using: &rng)
    )
}

// MARK: - Checking an outcome

/// The pattern's first `maxBodySize` bytes. (An array: held in a `Data`, LeakSanitizer reported
/// its storage as leaked at exit, the pointer to it being kept in a form it does not see.)
enum Reference {
    static let bytes: [UInt8] = FixtureServer.expectedBytes(count: maxBodySize)
}

func isPattern(_ data: Data, count: Int) -> Bool {
    guard data.count == count else { return false }
    return data.withUnsafeBytes { body in
        Reference.bytes.withUnsafeBytes { expected in
            count == 0 || memcmp(body.baseAddress!, expected.baseAddress!, count) == 0
        }
    }
}

func check(_ plan: Plan, _ result: Result<Response, RequestError>) -> (Outcome, Int) {
    if case .failure(.cancelled) = result {
        guard plan.cancel else { return (.unexpected("cancelled without a cancel"), 0) }
        // A file under its final name must be whole, cancelled or not.
        if let destination = plan.request.destination, FileManager.default.fileExists(atPath: destination.path) {
            guard let data = try? Data(contentsOf: destination), isPattern(data, count: plan.size) else {
                return (.unexpected("cancelled, with a partial file under its final name"), 0)
            }
            try? FileManager.default.removeItem(at: destination)
            return (.cancelledComplete, plan.size)
        }
        return (.cancelled, 0)
    }
    switch (plan.kind, result) {
    case (.body, .success(let response)):
        guard response.status.code == 200, isPattern(response.body, count: plan.size) else { break }
        return (.ok, plan.size)
    case (.download, .success(let response)):
        guard response.status.code == 200, let file = response.fileURL,
              let data = try? Data(contentsOf: file), isPattern(data, count: plan.size),
              !FileManager.default.fileExists(atPath: file.path + ".part")
        else { break }
        try? FileManager.default.removeItem(at: file)
        return (.ok, plan.size)
    case (.closeThenOK, .success(let response)), (.resetThenOK, .success(let response)):
        // "ok ID" only comes from the second request, so the fault happened. On a reused
        // connection libcurl itself sends the request again when the connection died before
        // any answer (attempts 1); on a new one autoRetry does (attempts 2).
        guard response.status.code == 200, (1...2).contains(response.attempts),
              response.body == Data("ok \(plan.id)".utf8)
        else { break }
        return (.ok, response.body.count)
    case (.midBodyCloseThenOK, .success(let response)):
        guard response.status.code == 200, response.attempts == 2, isPattern(response.body, count: plan.size) else { break }
        return (.ok, plan.size)
    case (.status503, .success(let response)):
        guard response.status.code == 503, response.attempts == 1, response.body == Data("status 503".utf8) else { break }
        return (.expectedFailure, 0)
    case (.cutShort, .failure(.transport(let failure))):
        guard failure.code == .partialFile else { break }
        return (.expectedFailure, 0)
    case (.stall, .failure(.timedOut(let failure))):
        guard failure.code == .operationTimedOut else { break }
        return (.expectedFailure, 0)
    default:
        break
    }
    switch result {
    case .success(let response):
        return (.unexpected("status \(response.status.code), \(response.body.count) bytes, attempts \(response.attempts)"), 0)
    case .failure(let error):
        return (.unexpected("\(error)"), 0)
    }
}

// MARK: - Measuring the process

func fileDescriptors() -> [String] {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    return names.compactMap { name in
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(name)")).map { "\(name) \($0)" }
    }.sorted()
}

/// The whole of a file read with plain `read` calls until end-of-file. For `/proc` files, which
/// report a size of 0 and hand out their text a page at a time: `String(contentsOfFile:)` gave
/// only the first part of a long `/proc/self/net/tcp` here.
func readWholeFile(_ path: String) -> String {
    let descriptor = open(path, O_RDONLY)
    guard descriptor >= 0 else { return "" }
    defer { close(descriptor) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = read(descriptor, &buffer, buffer.count)
        if count <= 0 { break }
        bytes.append(contentsOf: buffer[0..<count])
    }
    return String(decoding: bytes, as: UTF8.self)
}

func statusField(_ field: String) -> Int {
    let status = readWholeFile("/proc/self/status")
    let line = status.split(separator: "\n").first { $0.hasPrefix(field + ":") } ?? ""
    return line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
}

/// glibc's `malloc_trim` (not in Swift's Glibc module): gives malloc's free pages back to the
/// system, so that what stays resident is memory in use, not memory malloc keeps for later.
let mallocTrim: (@convention(c) (Int) -> Int32)? = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim")
    .map { unsafeBitCast($0, to: (@convention(c) (Int) -> Int32).self) }

func measure() -> Measure {
    let fds = fileDescriptors()
    let threads = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? 0
    let rss = statusField("VmRSS") * 1024
    _ = mallocTrim?(0)
    return Measure(fds: fds.count, fdList: fds, threads: threads, rssBytes: rss, trimmedRSSBytes: statusField("VmRSS") * 1024)
}

/// How many of this process's file descriptors are TCP sockets (their inodes are in
/// /proc/self/net/tcp or tcp6), in any state.
func tcpSockets() -> Int { tcpSocketDescriptors().count }

/// This process's TCP sockets as the kernel's tables show them: `local remote state` (hex
/// address:port, and the state's number: 01 established, 02 SYN_SENT, 06 TIME_WAIT, 08
/// CLOSE_WAIT, 0A listen, …). For the report when the quiet state is not reached.
func tcpSocketLines() -> [String] { tcpSocketDescriptors().map(\.line) }

/// This process's file descriptors that are TCP sockets, each with its socket's line in the
/// kernel's tables (see `tcpSocketLines()`).
func tcpSocketDescriptors() -> [(descriptor: Int32, line: String)] {
    var descriptors: [Substring: Int32] = [:]  // by socket inode
    for entry in fileDescriptors() {
        let parts = entry.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[1].hasPrefix("socket:["), let descriptor = Int32(parts[0]) else { continue }
        descriptors[parts[1].dropFirst("socket:[".count).dropLast()] = descriptor
    }
    var found: [(descriptor: Int32, line: String)] = []
    for table in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
        for line in readWholeFile(table).split(separator: "\n").dropFirst() {
            let columns = line.split(separator: " ")
            if columns.count > 9, let descriptor = descriptors[columns[9]] {
                found.append((descriptor, "\(columns[1]) \(columns[2]) \(columns[3])"))
            }
        }
    }
    return found
}

/// One request, waited for on this (non-cooperative) thread.
func fetch(_ url: String) -> Result<Response, RequestError> {
    let done = DispatchSemaphore(value: 0)
    let box = Locked<Result<Response, RequestError>?>(nil)
    let operation = RequestOperation(request: Request(url: URL(string: url)!))
    operation.completionHandler = { result in
        box.update { $0 = result }
        done.signal()
    }
    try! operation.start()
    done.wait()
    return box.update { $0! }
}

/// Brings the process to the same quiet state before and after the run: one TCP connection
/// left, to the fixture. Each round, the server closes every connection but the one the request
/// came on; a second later (libcurl drops dead connections from its cache at most once a
/// second, when a transfer starts) a probe on that same connection lets libcurl drop the ones
/// the server closed. Returns how many rounds that took, or -1 if 30 did not do it; then
/// `leftSockets` holds the sockets still open (see `tcpSocketLines()`).
func quiesce(base: String, round: String) -> Int {
    for attempt in 1...30 {
        _ = fetch(base + "/close-connections?r=\(round)-\(attempt)")
        // The sleep is the event: libcurl prunes dead connections at most once a second, timed by
        // its own clock, and offers no call to ask for it sooner.
        Thread.sleep(forTimeInterval: 1.1)
        _ = fetch(base + "/bytes/1?probe=\(round)-\(attempt)")
        if tcpSockets() == 1 { return attempt }
    }
    leftSockets += tcpSocketLines().map { "\(round): \($0)" }
    return -1
}

/// The TCP sockets left open when a quiet state was not reached.
nonisolated(unsafe) var leftSockets: [String] = []  // main thread only

// MARK: - The run

func run(base: String, count: Int, folder: URL, phase: String, seed: UInt64) -> Ledger {
    let ledger = Ledger(count: count)
    var rng = SplitMix(state: seed)
    let queues = [RequestQueue(maxConcurrentRequestCount: 32), RequestQueue(maxConcurrentRequestCount: 32)]
    let window = DispatchSemaphore(value: windowSize)
    let allDone = DispatchSemaphore(value: 0)
    let remaining = Locked(count)
    let candidates = DispatchSemaphore(value: 0)
    let postCompletionCancels = DispatchGroup()

    // Two threads cancel the chosen operations, in random order, whatever stage they are at.
    let cancellers = DispatchGroup()
    for _ in 0..<2 {
        DispatchQueue.global().async(group: cancellers) {
            var generator = SystemRandomNumberGenerator()
            while true {
                candidates.wait()
                let operation: RequestOperation?? = ledger.lock.withLock {
                    if ledger.finished && ledger.cancelCandidates.isEmpty { return .none }
                    guard !ledger.cancelCandidates.isEmpty else { return .some(nil) }
                    let pick = Int.random(in: 0..<ledger.cancelCandidates.count, using: &generator)
                    let index = ledger.cancelCandidates.remove(at: pick)
                    ledger.cancelsSent += 1
                    return .some(ledger.live[index])
                }
                guard let operation else { return }
                operation?.cancel()
            }
        }
    }

    for index in 0..<count {
        window.wait()
        // Made one at a time, so that no list of the whole run outlives it in memory.
        let plan = plan(index, phase: phase, base: base, folder: folder, rng: &rng)
        let operation = RequestOperation(request: plan.request)
        operation.autoRetry = plan.autoRetry
        operation.priority = plan.priority
        operation.completionHandler = { result in
            let (outcome, bytes) = check(plan, result)
            let finished = ledger.record(index, kind: plan.kind, outcome, bytes: bytes)
            // A cancel after completion must not call the handler again.
            if let finished {
                DispatchQueue.global().async(group: postCompletionCancels) { finished.cancel() }
            }
            window.signal()
            if remaining.update({ $0 -= 1; return $0 }) == 0 { allDone.signal() }
        }
        ledger.lock.withLock { ledger.live[index] = operation }
        try! queues[plan.queue].add(operation)
        if plan.cancel {
            ledger.lock.withLock { ledger.cancelCandidates.append(index) }
            candidates.signal()
        }
    }
    allDone.wait()
    ledger.lock.withLock { ledger.finished = true }
    candidates.signal()
    candidates.signal()
    cancellers.wait()
    // Every post-completion cancel has run, so a second completion it caused would already be
    // queued on the callback queue: let that queue drain before counting.
    postCompletionCancels.wait()
    let drained = DispatchSemaphore(value: 0)
    RequestOperation.defaultCallbackQueue.async { drained.signal() }
    drained.wait()
    precondition(queues.allSatisfy { $0.requestCount == 0 })
    return ledger
}

/// A value guarded by a lock.
final class Locked<Value>: @unchecked Sendable {  // safe: `value` is only touched under `lock`
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func update<T>(_ body: (inout Value) -> T) -> T { lock.withLock { body(&value) } }
}

/// Closes the TCP connections this process inherited. The test process spawns it while other
/// tests' fixture servers have connections open, and SwiftNIO accepts them without
/// close-on-exec (Foundation's `Process` closes what it finds open before it spawns, racing with
/// other threads' new descriptors): a copy held here kept those connections from closing for
/// the parent, and they would count as this process's own TCP sockets. None of its own exist
/// yet. Other sockets stay: `Process` watches the end of a socket pair it gives the child to
/// learn when the child exits.
func closeInheritedSockets() {
    for socket in tcpSocketDescriptors() { close(socket.descriptor) }
}
closeInheritedSockets()

let arguments = CommandLine.arguments
guard arguments.count == 4, let count = Int(arguments[2]), count > 0 else {
    FileHandle.standardError.write(Data("usage: Soak BASE_URL REQUESTS FOLDER\n".utf8))
    exit(2)
}
let base = arguments[1]
let folder = URL(fileURLWithPath: arguments[3])

// Warm-up: the same mix, a twentieth of the size but at least twice the window, so that the
// engine thread, Dispatch's threads, libcurl's handles and caches and malloc's arenas exist
// before the baseline is taken.
_ = run(base: base, count: max(2 * windowSize, count / 20), folder: folder, phase: "w", seed: 1)
var quietRounds = quiesce(base: base, round: "before")
let baseline = measure()

let started = Date()
let ledger = run(base: base, count: count, folder: folder, phase: "s", seed: 2)
let seconds = Date().timeIntervalSince(started)
let peak = statusField("VmHWM") * 1024

let afterRounds = quiesce(base: base, round: "after")
quietRounds = quietRounds < 0 || afterRounds < 0 ? -1 : max(quietRounds, afterRounds)
// Idle Dispatch worker threads exit on their own after a few seconds: wait (up to 30 s) for
// the thread count to come back, measuring once a second.
var after = measure()
for _ in 0..<30 where after.threads > baseline.threads {
    // Dispatch lets an idle worker go after a timeout of its own and tells nobody: the thread
    // count, read once a second, is the only sign of it (a bounded wait, not a hope).
    Thread.sleep(forTimeInterval: 1)
    after = measure()
}

let report = ledger.lock.withLock {
    Report(
        requests: count,
        completions: ledger.calls.reduce(0) { $0 + Int($1) },
        operationsCompletedTwiceOrMore: ledger.calls.filter { $0 > 1 }.count,
        operationsNeverCompleted: ledger.calls.filter { $0 == 0 }.count,
        byKind: Dictionary(uniqueKeysWithValues: ledger.byKind.map { ($0.key.rawValue, $0.value) }),
        unexpectedExamples: ledger.examples,
        bodyBytesVerified: ledger.bytesVerified,
        cancelsSent: ledger.cancelsSent,
        seconds: seconds,
        baseline: baseline,
        after: after,
        peakRSSBytes: peak,
        quietStateAttempts: quietRounds,
        leftSockets: leftSockets
    )
}
let encoder = JSONEncoder()
encoder.outputFormatting = [.sortedKeys]
// Written at once, unbuffered: under a sanitizer the exit-time leak check ends the process with
// _exit, which would lose a buffered print.
FileHandle.standardOutput.write(try! encoder.encode(report) + Data("\n".utf8))
