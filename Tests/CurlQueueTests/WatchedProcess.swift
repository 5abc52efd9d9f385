import CurlQueueTestHelpers
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A child program whose output (standard output and error together) is read as it comes, so
/// that a test can wait for the line saying it is ready (an event) instead of probing it.
/// ``stop()`` kills it with SIGKILL and reaps it; so does `deinit`, should a test throw first.
final class WatchedProcess: @unchecked Sendable {  // safe: `process` is not changed after `init`; `output` and `ended` are guarded by `condition`
    let name: String
    private let process: Process
    private let condition = NSCondition()
    private var output = ""
    private var ended = false

    /// Starts `executable` with `arguments`, its standard input /dev/null.
    init(_ executable: String, _ arguments: [String]) throws {
        name = URL(fileURLWithPath: executable).lastPathComponent
        process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let reading = pipe.fileHandleForReading
        Thread { [condition] in
            while true {
                let data = reading.availableData
                condition.lock()
                if data.isEmpty {
                    self.ended = true
                } else {
                    self.output += String(decoding: data, as: UTF8.self)
                }
                condition.broadcast()
                condition.unlock()
                if data.isEmpty { return }
            }
        }.start()
    }

    var pid: pid_t { process.processIdentifier }

    /// What it printed so far.
    var printed: String { condition.withLock { output } }

    /// Waits until a line of its output gives a value through `match` and returns it; throws
    /// when its output ends (it exited) or `timeout` passes first.
    @discardableResult
    func waitForLine<T: Sendable>(
        within timeout: Duration = .seconds(30),
        _ match: @escaping @Sendable (Substring) -> T?
    ) async throws -> T {
        try await offThePool { [self] in
            let deadline = Date().addingTimeInterval(Double(timeout.components.seconds))
            condition.lock()
            defer { condition.unlock() }
            while true {
                // Whole lines only: a line still being written is looked at once it ends.
                for line in output.split(separator: "\n", omittingEmptySubsequences: false).dropLast() {
                    if let value = match(line) { return value }
                }
                if ended { throw WatchedProcessError.ended(name, output) }
                if !condition.wait(until: deadline) { throw WatchedProcessError.timedOut(name, output) }
            }
        }
    }

    /// Kills it (SIGKILL: a child started from a Dispatch worker thread inherits that thread's
    /// blocked signals, SIGTERM among them) and reaps it.
    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    deinit { stop() }
}

enum WatchedProcessError: Error, CustomStringConvertible {
    case ended(String, String)
    case timedOut(String, String)

    var description: String {
        switch self {
        case .ended(let name, let output): return "\(name) ended before it was ready; it printed:\n\(output)"
        case .timedOut(let name, let output): return "\(name) was not ready in time; it printed:\n\(output)"
        }
    }
}
