@testable import curlq
import Dispatch
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

// A running `curlq` for the tests of its messages (CurlqMessagesTests, CurlqJSONReportTests):
// the binary built next to the tests, started with posix_spawn, its standard error read as it
// comes so that a test can wait for a line (an event) rather than sleep.

/// How a run of `curlq` ended.
struct MessagesRun: CustomStringConvertible {
    var status: Int32
    var stdout: String
    var stderr: String
    var seconds: Double

    var description: String { "status \(status)\nstdout: \(stdout)\nstderr: \(stderr)" }

    /// The `files` of the `--json` report, in input order.
    func jsonFiles() throws -> [[String: Any]] {
        let object = try JSONSerialization.jsonObject(with: Data(stdout.utf8)) as? [String: Any]
        return try #require(object?["files"] as? [[String: Any]], "no files in: \(stdout)")
    }

    func json() throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(stdout.utf8)) as? [String: Any])
    }
}

final class MessagesProcess: @unchecked Sendable {  // safe: the mutable `stderrText` is guarded by `lock`
    let pid: pid_t
    private let stdoutPipe: Int32
    private let started = Date()
    private let lock = NSCondition()
    private var stderrText = ""
    private var stderrClosed = false

    static var executable: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("curlq").path
    }

    /// Starts `curlq arguments…` with /dev/null as standard input and NO_COLOR set.
    init(_ arguments: [String], environment extra: [String: String] = [:]) throws {
        func makePipe() throws -> (read: Int32, write: Int32) {
            var fds: [Int32] = [0, 0]
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else {
                throw POSIXError(.init(rawValue: errno) ?? .EIO)
            }
            return (fds[0], fds[1])
        }
        let out = try makePipe()
        let err = try makePipe()
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, out.write, 1)
        posix_spawn_file_actions_adddup2(&actions, err.write, 2)
        var environment = ProcessInfo.processInfo.environment
        environment["NO_COLOR"] = "1"
        environment.merge(extra) { $1 }
        let argv = ([Self.executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, Self.executable, &actions, nil, argv, envp)
        close(out.write)
        close(err.write)
        guard spawned == 0 else {
            close(out.read)
            close(err.read)
            throw POSIXError(.init(rawValue: spawned) ?? .EIO)
        }
        self.pid = pid
        self.stdoutPipe = out.read
        let errorPipe = err.read
        Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = read(errorPipe, &buffer, buffer.count)
                if count < 0 && errno == EINTR { continue }
                lock.lock()
                if count <= 0 {
                    stderrClosed = true
                } else {
                    stderrText += String(decoding: buffer[0..<count], as: UTF8.self)
                }
                lock.broadcast()
                lock.unlock()
                if count <= 0 { break }
            }
            close(errorPipe)
        }.start()
    }

    func send(_ signal: Int32) { kill(pid, signal) }

    /// Standard error so far.
    func errorSoFar() async -> String { lock.withLock { stderrText } }

    /// Waits until the process has stopped (SIGSTOP, SIGTSTP…), leaving the notice for `finish`.
    func waitUntilStopped() async -> Bool {
        let pid = self.pid
        return await withCheckedContinuation { continuation in
            Thread {
                var info = siginfo_t()
                var result: Int32
                repeat { result = waitid(P_PID, id_t(pid), &info, WSTOPPED | WNOWAIT) } while result < 0 && errno == EINTR
                continuation.resume(returning: result == 0 && info.si_code == CLD_STOPPED)
            }.start()
        }
    }

    /// Waits until standard error holds `text` (true), or ends or `timeout` passes without it.
    func waitForError(containing text: String, timeout: Double = 30) async -> Bool {
        await waitForError(timeout: timeout) { $0.contains(text) }
    }

    /// Waits until standard error so far satisfies `test` (true), or ends or `timeout` passes.
    func waitForError(timeout: Double = 30, _ test: @escaping @Sendable (String) -> Bool) async -> Bool {
        await withCheckedContinuation { continuation in
            Thread { [self] in
                let deadline = Date().addingTimeInterval(timeout)
                lock.lock()
                while !test(stderrText), !stderrClosed, lock.wait(until: deadline) {}
                let found = test(stderrText)
                lock.unlock()
                continuation.resume(returning: found)
            }.start()
        }
    }

    /// Waits for the process to exit (killing it after `timeout` seconds) and collects its output.
    func finish(timeout: Double = 90) async -> MessagesRun {
        let pid = self.pid
        let stdoutPipe = self.stdoutPipe
        let watchdog = DispatchWorkItem { kill(pid, SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: watchdog)
        let stdout = await withCheckedContinuation { (continuation: CheckedContinuation<String, Never>) in
            Thread {
                var data = Data()
                var buffer = [UInt8](repeating: 0, count: 65536)
                while true {
                    let count = read(stdoutPipe, &buffer, buffer.count)
                    if count < 0 && errno == EINTR { continue }
                    if count <= 0 { break }
                    data.append(buffer, count: count)
                }
                close(stdoutPipe)
                continuation.resume(returning: String(decoding: data, as: UTF8.self))
            }.start()
        }
        let status = await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
            Thread {
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                continuation.resume(returning: status)
            }.start()
        }
        watchdog.cancel()
        _ = await waitForError(containing: "\u{0}never\u{0}", timeout: 10)  // until standard error is closed
        let stderr = lock.withLock { stderrText }
        let signalled = status & 0x7F != 0
        return MessagesRun(status: signalled ? 128 + (status & 0x7F) : (status >> 8) & 0xFF,
                           stdout: stdout, stderr: stderr, seconds: Date().timeIntervalSince(started))
    }
}

/// Runs `curlq arguments…` to its end.
func runCurlq(_ arguments: String..., environment: [String: String] = [:]) async throws -> MessagesRun {
    try await runCurlq(arguments, environment: environment)
}

func runCurlq(_ arguments: [String], environment: [String: String] = [:]) async throws -> MessagesRun {
    try await MessagesProcess(arguments, environment: environment).finish()
}

func filesIn(_ folder: URL) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).sorted()
}

/// Waits, woken by inotify, until the file at `path` holds at least `bytes` bytes.
func waitForGrowth(_ path: String, atLeast bytes: Int64, timeout: Double = 30) async -> Bool {
    await withCheckedContinuation { continuation in
        Thread {
            let watcher = inotify_init1(Int32(IN_CLOEXEC))
            defer { close(watcher) }
            _ = inotify_add_watch(watcher, (path as NSString).deletingLastPathComponent, UInt32(IN_MODIFY | IN_CREATE | IN_CLOSE_WRITE))
            let deadline = Date().addingTimeInterval(timeout)
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                if let size = (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber, size.int64Value >= bytes {
                    continuation.resume(returning: true)
                    return
                }
                let remaining = deadline.timeIntervalSinceNow
                if remaining <= 0 {
                    continuation.resume(returning: false)
                    return
                }
                var descriptor = pollfd(fd: watcher, events: Int16(POLLIN), revents: 0)
                if poll(&descriptor, 1, Int32(min(remaining, 1) * 1000)) > 0 { _ = read(watcher, &buffer, buffer.count) }
            }
        }.start()
    }
}
