import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `--on-download-complete COMMAND` (aria2c's hook): after each file is downloaded
/// (and verified, and named), COMMAND runs with the file's absolute path as its one argument.
///
/// - Never through a shell: `posix_spawnp` with `[COMMAND, PATH]`, so no name a server or an
///   input file chose is ever read as shell syntax; COMMAND is an executable (found in `PATH`
///   when it has no `/`). A script wanting a shell gets its arguments as `"$1"`.
/// - Environment: curlq's own, plus `CURLQ_PATH` (the same path), `CURLQ_URL` (the URL as
///   given), `CURLQ_BYTES` and, when computed, `CURLQ_SHA256`.
/// - Standard input is `/dev/null`; its standard output goes to curlq's standard error, so that
///   `--json` output stays one JSON document; signals have their default dispositions.
/// - One hook at a time, in the order files complete, on a queue of its own (never the batch
///   runner's); the batch ends (summary, report) only once every hook has returned.
/// - A hook that exits non-zero, dies of a signal or cannot start is reported (a line, and
///   `hook` in the JSON record) and makes the exit status 1; the file stays downloaded.
final class DownloadHook: Sendable {
    let command: String
    private let queue = DispatchQueue(label: "curlq.hook")

    init(command: String) { self.command = command }

    /// How one run of the hook ended.
    enum Outcome: Sendable, Equatable {
        case exited(Int32)
        case signalled(Int32)
        case notStarted(String)

        var succeeded: Bool { self == .exited(0) }

        /// In words: `exited with status 3`, `killed by signal 9`, `could not start: …`.
        var words: String {
            switch self {
            case .exited(let status): return "exited with status \(status)"
            case .signalled(let number): return "killed by signal \(number)"
            case .notStarted(let reason): return "could not start: \(reason)"
            }
        }
    }

    /// Runs the hook for one file after those before it, then calls `completion` (on the hook's queue).
    func run(path: String, url: URL, bytes: Int64, sha256: String?, completion: @escaping @Sendable (Outcome) -> Void) {
        queue.async { [command] in
            var environment = ProcessInfo.processInfo.environment
            environment["CURLQ_PATH"] = path
            environment["CURLQ_URL"] = url.absoluteString
            environment["CURLQ_BYTES"] = String(bytes)
            environment["CURLQ_SHA256"] = sha256
            completion(Self.spawn([command, path], environment: environment))
        }
    }

    /// Starts `arguments[0]` (searched in `PATH`) and waits for it.
    static func spawn(_ arguments: [String], environment: [String: String]) -> Outcome {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, 2, 1)  // standard output: curlq's standard error
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // curlq ignores SIGPIPE and handles SIGINT/SIGTERM itself: the hook gets the defaults.
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGINT, SIGTERM, SIGTSTP, SIGCONT, SIGHUP, SIGQUIT] { sigaddset(&defaults, signal) }
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setsigmask(&attributes, &mask)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let spawned = posix_spawnp(&pid, arguments[0], &actions, &attributes, argv, envp)
        guard spawned == 0 else { return .notStarted(String(cString: strerror(spawned))) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            if errno != EINTR { return .notStarted(String(cString: strerror(errno))) }
        }
        // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import (macros).
        if status & 0x7F == 0 { return .exited((status >> 8) & 0xFF) }
        return .signalled(status & 0x7F)
    }
}
