// Helpers shared by CurlQueueTests and CurlQueueClientTests.
public import CurlQueue
public import CurlQueueTestSupport
public import Dispatch
public import Foundation

/// Starts a fixture server for the duration of `body`.
public func withServer<T>(_ body: (FixtureServer) async throws -> T) async throws -> T {
    let server = try await FixtureServer.start()
    do {
        let value = try await body(server)
        try await server.shutdown()
        return value
    } catch {
        try? await server.shutdown()
        throw error
    }
}

/// Sets the operation's completion handler, starts it, and waits for the handler to run.
public func completion(of operation: RequestOperation, start: Bool = true) async -> Result<Response, RequestError> {
    await withCheckedContinuation { continuation in
        operation.completionHandler = { continuation.resume(returning: $0) }
        if start { try! operation.start() }
    }
}

/// The curl code of a `.transport` failure; nil for a response or any other error.
public func transportCode(of result: Result<Response, RequestError>) -> CurlCode? {
    guard case .failure(.transport(let failure)) = result else { return nil }
    return failure.code
}

/// Waits until every handler already dispatched to `queue` has run.
public func drain(_ queue: DispatchQueue = RequestOperation.defaultCallbackQueue) async {
    await withCheckedContinuation { continuation in queue.async { continuation.resume() } }
}

/// A value that handlers on other threads record into and the test reads: every read and
/// `update` is under an NSLock (which ThreadSanitizer understands).
public final class LockedBox<Value: Sendable>: @unchecked Sendable {  // safe: `storage` is only touched under `lock`
    private let lock = NSLock()
    private var storage: Value
    public init(_ value: Value) { storage = value }
    public var value: Value { lock.withLock { storage } }
    public func update<T>(_ body: (inout Value) -> T) -> T { lock.withLock { body(&storage) } }
}

/// A fresh folder under the system's temporary folder, removed by the caller with `cleanup`.
public func makeTemporaryFolder() throws -> URL {
    let url = FileManager.default.temporaryDirectory
        .appendingPathComponent("curlqueue-tests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// A fresh temporary folder for the duration of `body`.
public func withFolder<T>(_ body: (URL) async throws -> T) async throws -> T {
    let folder = try makeTemporaryFolder()
    defer { try? FileManager.default.removeItem(at: folder) }
    return try await body(folder)
}

/// Whether a file (of any kind) is at `url`.
public func exists(_ url: URL) -> Bool { FileManager.default.fileExists(atPath: url.path) }

/// Where a download to `url` writes until it is complete.
public func part(_ url: URL) -> URL { URL(fileURLWithPath: url.path + ".part") }

extension Result {
    /// The error of a failure; nil for a success.
    public var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

extension Response {
    public var bodyBytes: [UInt8] { Array(body) }
}

/// An ephemeral port that nothing listens on (bound, then released).
public func unusedPort() async throws -> Int {
    let server = try await FixtureServer.start()
    let port = server.port
    try await server.shutdown()
    return port
}

/// Runs `work` on a thread of its own and returns what it returns: for a test's long
/// synchronous work (a big file written, a CPU-bound loop of seconds).
///
/// Swift's concurrency pool has one thread per core (two here) and runs every test of the
/// parallel suite. A test body that holds one of them for seconds holds up every other test's
/// tasks, so that their requests reach the fixture late and their time bounds fail: a
/// watchdog saw the pool not run a task for up to 47 s while a 512 MiB file was written and a
/// 100,000-item scheduler test ran on its two threads.
public func offThePool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try work() }) }.start()
    }
}

/// The executable `name` built alongside the tests (SwiftPM puts it in the tests' build folder).
public func builtProduct(_ name: String) -> URL {
    URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(name)
}

/// Waits (on a thread of its own) for the started `process` to exit, up to `timeout`, and
/// returns its exit status; past `timeout` it kills the process, reaps it and returns nil.
public func waitForExit(of process: Process, within timeout: Duration) async throws -> Int32? {
    // The exit is waited for on a thread of its own; the time limit is a timer that, should it
    // fire first, kills the process, which ends that wait.
    let pid = process.processIdentifier
    let timedOut = LockedBox(false)
    let limit = Task {
        try? await Task.sleep(for: timeout)  // the sleep IS the time limit
        guard !Task.isCancelled else { return }
        timedOut.update { $0 = true }
        kill(pid, SIGKILL)
    }
    let status: Int32 = try await offThePool {
        process.waitUntilExit()
        return process.terminationStatus
    }
    limit.cancel()
    return timedOut.value ? nil : status
}

/// Runs an executable built alongside the tests (same build folder) and returns its
/// standard output once it exits.
public func runBuiltProduct(_ name: String, _ arguments: [String]) async throws -> String {
    let process = Process()
    process.executableURL = builtProduct(name)
    process.arguments = arguments
    return try await runToEnd(process).output
}

/// Starts `process`, and returns its standard output (as text) and exit status once it exits.
///
/// The blocking read and wait go to a thread of their own, not to Dispatch's few workers,
/// which Swift concurrency's tasks run on too (blocking them all stalls every task).
public func runToEnd(_ process: Process) async throws -> (output: String, status: Int32) {
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    return try await withCheckedThrowingContinuation { continuation in
        Thread {
            let result = Result { try pipe.fileHandleForReading.readToEnd() ?? Data() }
            process.waitUntilExit()
            continuation.resume(with: result.map { (String(decoding: $0, as: UTF8.self), process.terminationStatus) })
        }.start()
    }
}

/// A TCP listener on 127.0.0.1 whose accept queue is full (backlog 0, filled by three
/// non-blocking connects): the kernel drops new connection attempts, which hang until their
/// client gives up. Returns its port and every descriptor to close afterwards.
///
/// Returns once the kernel shows the queue full (``acceptQueueLength(ofListenerOn:)``): the
/// condition the callers rely on, checked rather than assumed from the connects returning (a
/// client that got the queue's place would be connected, with no connect limit left to run).
public func fullBacklogListener() async throws -> (port: Int, descriptors: [Int32]) {
    let (listener, bound) = try loopbackListener(backlog: 0)
    var address = bound
    let length = socklen_t(MemoryLayout<sockaddr_in>.size)
    var descriptors = [listener]
    for _ in 0..<3 {
        let filler = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        descriptors.append(filler)
        withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = connect(filler, $0, length) }
        }
    }
    let port = Int(UInt16(bigEndian: address.sin_port))
    // The event is the kernel's: poll its table of sockets (every 10 ms, for up to 30 s).
    for _ in 0..<3000 {
        if acceptQueueLength(ofListenerOn: port) >= 1 { return (port, descriptors) }
        try await Task.sleep(for: .milliseconds(10))
    }
    descriptors.forEach { close($0) }
    throw POSIXError(.ETIMEDOUT)
}

/// How many connections wait in the accept queue of the listening socket on 127.0.0.1:`port`
/// (its `rx_queue` in /proc/self/net/tcp), or -1 if there is no such listener.
public func acceptQueueLength(ofListenerOn port: Int) -> Int {
    let hex = String(port, radix: 16, uppercase: true)
    let local = ":" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    for line in readWholeFile("/proc/self/net/tcp").split(separator: "\n").dropFirst() {
        let columns = line.split(separator: " ")
        // sl, local_address, rem_address, st (0A: listening), tx_queue:rx_queue
        guard columns.count > 4, columns[1].hasSuffix(local), columns[3] == "0A",
              let queues = columns[4].split(separator: ":").last else { continue }
        return Int(queues, radix: 16) ?? -1
    }
    return -1
}

/// A TCP socket listening on an ephemeral port of 127.0.0.1 with `backlog`, and its address.
public func loopbackListener(backlog: Int32) throws -> (descriptor: Int32, address: sockaddr_in) {
    let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let listening = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
            bind(listener, raw, length) == 0 && listen(listener, backlog) == 0 && getsockname(listener, raw, &length) == 0
        }
    }
    guard listening else {
        close(listener)
        throw POSIXError(.EADDRINUSE)
    }
    return (listener, address)
}

/// The whole of a file read with plain `read` calls until end-of-file. For `/proc` files, which
/// report a size of 0 and hand out their text a page at a time: `String(contentsOfFile:)` gave
/// only the first part of a long `/proc/self/net/tcp` here.
public func readWholeFile(_ path: String) -> String {
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

/// Runs `call` `each` times one after another in each of `tasks` concurrent tasks; the first
/// error thrown ends them all and is rethrown.
public func callConcurrently(tasks: Int, each: Int, _ call: @escaping @Sendable () async throws -> Void) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<tasks {
            group.addTask {
                for _ in 0..<each { try await call() }
            }
        }
        try await group.waitForAll()
    }
}

/// A download folder, and outside it a file a planted link points a download at: the victim,
/// which must keep its ``secret``.
public struct FolderWithVictim: Sendable {
    /// The download folder, empty at the start.
    public let folder: URL
    /// A file in another temporary folder, holding ``secret``.
    public let victim: URL
    /// What the victim holds.
    public let secret: Data

    /// Whether the victim still holds its secret.
    public var victimIsUntouched: Bool { (try? Data(contentsOf: victim)) == secret }
}

/// A fresh download folder and a victim outside it for the duration of `body`; both folders
/// are removed after it.
public func withFolderAndVictim<T>(_ body: (FolderWithVictim) async throws -> T) async throws -> T {
    try await withFolder { folder in
        try await withFolder { outside in
            let victim = outside.appendingPathComponent("victim")
            let secret = Data("do not overwrite me".utf8)
            try secret.write(to: victim)
            return try await body(FolderWithVictim(folder: folder, victim: victim, secret: secret))
        }
    }
}
