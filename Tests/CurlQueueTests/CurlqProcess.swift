@testable import curlq
import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Dispatch
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

// What the end-to-end tests of the `curlq` executable (the Curlq*Tests suites that run it) share:
// the binary built next to the tests runs as a subprocess against a fixture server started by
// each test. Every wait is for an event: the process's exit, a request reaching the server, or
// a file growing (inotify).

/// How a run of `curlq` ended.
struct CurlqRun: CustomStringConvertible {
    /// The exit status, or 128 + the signal that killed it.
    var status: Int32
    var killedBySignal: Bool
    var stdout: String
    var stderr: String
    /// Peak resident memory of the process, from `wait4`.
    var peakMemoryKiB: Int
    var seconds: Double

    var description: String { "status \(status)\nstdout: \(stdout)\nstderr: \(stderr)" }

    /// Standard output parsed as one JSON object.
    func json() throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: Data(stdout.utf8))
        return try #require(object as? [String: Any], "stdout is not a JSON object: \(stdout)")
    }

    /// The `files` of the JSON report, in input order.
    func jsonFiles() throws -> [[String: Any]] {
        try #require(try json()["files"] as? [[String: Any]])
    }
}

/// A running `curlq`, started with `posix_spawn`; it reports its own peak memory at exit.
/// Its standard error is read as it comes, so that a test can wait for a line (an event:
/// `waitForError`) rather than sleep.
final class CurlqProcess: @unchecked Sendable {  // safe: `pid` and the pipes are immutable; the mutable `stderrText` and `stderrClosed` are guarded by `lock`
    let pid: pid_t
    private let stdoutPipe: Int32
    private let started = Date()
    private let lock = NSCondition()
    private var stderrText = ""
    private var stderrClosed = false

    static var executable: String { builtProduct("curlq").path }

    /// Starts `curlq arguments…` in `directory`, with `input` on its standard input
    /// (else /dev/null), NO_COLOR set and `environment` added.
    init(_ arguments: [String], input: Data? = nil, in directory: URL? = nil, environment extra: [String: String] = [:]) throws {
        // Socket pairs made close-on-exec atomically, so that a curlq started at the same time
        // by another test cannot inherit them (and hold this one's output open).
        func makePipe() throws -> (read: Int32, write: Int32) {
            var fds: [Int32] = [0, 0]
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else {
                throw POSIXError(.init(rawValue: errno) ?? .EIO)
            }
            return (fds[0], fds[1])
        }
        let out = try makePipe()
        let err = try makePipe()
        let stdin = try makePipe()

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if input != nil {
            posix_spawn_file_actions_adddup2(&actions, stdin.read, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        posix_spawn_file_actions_adddup2(&actions, out.write, 1)
        posix_spawn_file_actions_adddup2(&actions, err.write, 2)

        var environment = ProcessInfo.processInfo.environment
        environment["NO_COLOR"] = "1"
        environment["CURLQ_REPORT_PEAK_MEMORY"] = "1"
        environment.merge(extra) { $1 }
        // In another folder: through `sh -c 'cd … && exec curlq …'`, so that the process waited
        // for is still curlq itself.
        let command = directory.map { ["/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", $0.path, Self.executable] } ?? [Self.executable]
        let argv = (command + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, command[0], &actions, nil, argv, envp)
        close(out.write)
        close(err.write)
        close(stdin.read)
        guard spawned == 0 else {
            close(out.read)
            close(err.read)
            close(stdin.write)
            throw POSIXError(.init(rawValue: spawned) ?? .EIO)
        }
        self.pid = pid
        self.stdoutPipe = out.read
        let writer = stdin.write
        Thread {
            if let input {
                input.withUnsafeBytes { bytes in
                    var offset = 0
                    while offset < bytes.count {
                        let written = write(writer, bytes.baseAddress! + offset, bytes.count - offset)
                        if written <= 0 { break }
                        offset += written
                    }
                }
            }
            close(writer)
        }.start()
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

    /// Standard error so far (without the peak memory line).
    func errorSoFar() async -> String { lock.withLock { Self.withoutMemoryReport(stderrText) } }

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

    /// Waits until standard error so far (without the peak memory line) satisfies `test`
    /// (true), or ends or `timeout` passes.
    func waitForError(timeout: Double = 30, _ test: @escaping @Sendable (String) -> Bool) async -> Bool {
        await withCheckedContinuation { continuation in
            Thread { [self] in
                let deadline = Date().addingTimeInterval(timeout)
                lock.lock()
                while !test(Self.withoutMemoryReport(stderrText)), !stderrClosed, lock.wait(until: deadline) {}
                let found = test(Self.withoutMemoryReport(stderrText))
                lock.unlock()
                continuation.resume(returning: found)
            }.start()
        }
    }

    /// curlq's own VmHWM, from the line `CURLQ_REPORT_PEAK_MEMORY` makes it print at exit
    /// (`rusage` cannot tell: a child's `ru_maxrss` counts this test process's memory too).
    static func withoutMemoryReport(_ stderr: String) -> String {
        guard let range = stderr.range(of: "curlq: peak memory ", options: .backwards),
              stderr[range.lowerBound...].hasSuffix(" KiB\n") else { return stderr }
        return String(stderr[..<range.lowerBound])
    }

    static func peakMemoryKiB(reportedIn stderr: String) -> Int {
        guard let line = stderr.split(separator: "\n").last(where: { $0.hasPrefix("curlq: peak memory ") }) else { return .max }
        return Int(line.split(separator: " ")[3]) ?? .max
    }

    /// Waits for the process to exit (killing it after `timeout` seconds) and collects its output.
    func finish(timeout: Double = 90) async -> CurlqRun {
        async let stdout = Self.readAll(stdoutPipe)
        let pid = self.pid
        let watchdog = DispatchWorkItem { kill(pid, SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: watchdog)
        let status = await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
            Thread {
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                continuation.resume(returning: status)
            }.start()
        }
        watchdog.cancel()
        let output = await stdout
        await untilErrorClosed()
        let stderr = lock.withLock { stderrText }
        let signalled = status & 0x7F != 0
        return CurlqRun(
            status: signalled ? 128 + (status & 0x7F) : (status >> 8) & 0xFF, killedBySignal: signalled,
            stdout: output, stderr: Self.withoutMemoryReport(stderr),
            peakMemoryKiB: Self.peakMemoryKiB(reportedIn: stderr),
            seconds: Date().timeIntervalSince(started))
    }

    /// Waits until the reader of standard error has seen it closed (every copy of the pipe's
    /// write end gone: curlq's, and any child's it left behind).
    private func untilErrorClosed() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread { [self] in
                lock.lock()
                while !stderrClosed { lock.wait() }
                lock.unlock()
                continuation.resume()
            }.start()
        }
    }

    private static func readAll(_ descriptor: Int32) async -> String {
        await withCheckedContinuation { continuation in
            Thread {
                var data = Data()
                var buffer = [UInt8](repeating: 0, count: 65536)
                while true {
                    let count = read(descriptor, &buffer, buffer.count)
                    if count < 0 && errno == EINTR { continue }
                    if count <= 0 { break }
                    data.append(buffer, count: count)
                }
                close(descriptor)
                continuation.resume(returning: String(decoding: data, as: UTF8.self))
            }.start()
        }
    }
}

/// Runs `curlq arguments…` to its end: standard input `input` (else /dev/null), in `directory`,
/// with `environment` added to this process's.
func curlq(_ arguments: [String], input: String? = nil, in directory: URL? = nil,
           environment: [String: String] = [:]) async throws -> CurlqRun {
    try await CurlqProcess(arguments, input: input.map { Data($0.utf8) }, in: directory, environment: environment).finish()
}

func curlq(_ arguments: String..., input: String? = nil, in directory: URL? = nil,
           environment: [String: String] = [:]) async throws -> CurlqRun {
    try await curlq(arguments, input: input, in: directory, environment: environment)
}

func contents(_ url: URL) -> [UInt8]? { (try? Data(contentsOf: url)).map(Array.init) }
func files(in folder: URL) -> [String] { ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).sorted() }

/// Whether the tests (and so the curlq built with them) run under a sanitizer: the project's
/// scripts say so in CURLQUEUE_SANITIZER, and a plain `swift test --sanitize=thread` leaves
/// ThreadSanitizer's runtime in the process.
let underSanitizer = ProcessInfo.processInfo.environment["CURLQUEUE_SANITIZER"] != nil
    || dlsym(nil, "__tsan_init") != nil || dlsym(nil, "__asan_init") != nil  // nil is RTLD_DEFAULT
