// What every Swift benchmark client shares: its command line, the clock, the process's CPU
// time (getrusage) and peak memory (VmHWM), and the one JSON line it prints at the end.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The workload, from `--name value` pairs on the command line.
///
///     --url URL           base URL; request i fetches URL?i=<i> (so no two requests are equal)
///     --requests N        transfers in all
///     --concurrency C     transfers at once
///     --ca FILE           PEM file of the CA to trust (HTTPS)
///     --out DIR           write each body to DIR/body-<i> instead of keeping or discarding it
///     --expect BYTES      the body size every response must have (else it counts as an error)
///     --mode NAME         client-specific variant (cq-bench: handler, async, sched-cancel, sched-priority)
///     --same-url          every request fetches URL itself: all requests are equal
///     --keep-bodies       keep every body in memory, however large (cq-bench: not discarded)
public struct Workload: Sendable {
    public var url = ""
    public var requests = 0
    public var concurrency = 1
    public var caFile: String?
    public var outDirectory: String?
    public var expectedBytes: Int?
    public var mode = ""
    /// With `--same-url`: every request fetches `url` itself, so all requests are equal.
    public var sameURL = false
    /// With `--keep-bodies`: bodies are kept in memory, however large.
    public var keepBodies = false

    public init(arguments: [String] = CommandLine.arguments) {
        var index = 1
        func value() -> String {
            index += 1
            guard index < arguments.count else { fail("missing value for \(arguments[index - 1])") }
            return arguments[index]
        }
        while index < arguments.count {
            switch arguments[index] {
            case "--url": url = value()
            case "--requests": requests = Int(value()) ?? 0
            case "--concurrency": concurrency = max(1, Int(value()) ?? 1)
            case "--ca": caFile = value()
            case "--out": outDirectory = value()
            case "--expect": expectedBytes = Int(value())
            case "--mode": mode = value()
            case "--same-url": sameURL = true
            case "--keep-bodies": keepBodies = true
            default: fail("unknown argument \(arguments[index])")
            }
            index += 1
        }
        urlPrefix = url + "?i="
    }

    /// The URL of request `i`: one concatenation, as the C baseline's one `snprintf` (string
    /// interpolation cost twice as much, which is the client's cost, not the library's).
    public func url(_ i: Int) -> String { sameURL ? url : urlPrefix + String(i) }
    private var urlPrefix = ""

    /// The file request `i` writes to, with `--out`.
    public func outPath(_ i: Int) -> String? { outDirectory.map { "\($0)/body-\(i)" } }
}

public func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("error: \(message)\n".utf8))
    exit(2)
}

/// A monotonic clock reading, in seconds.
public func now() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

/// User and system CPU time of the whole process so far, in seconds.
public func cpuTime() -> (user: Double, system: Double) {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    func seconds(_ value: timeval) -> Double { Double(value.tv_sec) + Double(value.tv_usec) / 1e6 }
    return (seconds(usage.ru_utime), seconds(usage.ru_stime))
}

/// A field of /proc/self/status in KiB (VmHWM: peak resident set; VmRSS: resident now).
public func procStatusKiB(_ field: String) -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return -1 }
    for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
        let digits = line.dropFirst(field.count + 1).filter(\.isNumber)
        return Int(digits) ?? -1
    }
    return -1
}

/// Measures from `start()` to `finish(...)`, which prints the one JSON line.
public struct Measurement {
    public let startTime: Double
    public let startCPU: (user: Double, system: Double)

    public static func start() -> Measurement {
        Measurement(startTime: now(), startCPU: cpuTime())
    }

    /// Prints `{"requests":…,"seconds":…,"cpu_user":…,"cpu_sys":…,"rss_peak_kib":…,"errors":…,"bytes":…}`
    /// plus `extra`. CPU counts from process start (the runtime's own start-up included, as
    /// for a C client), so it is the cost a user of the client pays.
    public func finish(requests: Int, errors: Int, bytes: Int64, extra: [String: Any] = [:]) {
        let seconds = now() - startTime
        let cpu = cpuTime()
        var object: [String: Any] = [
            "requests": requests,
            "seconds": seconds,
            "cpu_user": cpu.user,
            "cpu_sys": cpu.system,
            "rss_peak_kib": procStatusKiB("VmHWM"),
            "errors": errors,
            "bytes": bytes,
        ]
        for (key, value) in extra { object[key] = value }
        let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        print(String(decoding: data, as: UTF8.self))
        fflush(nil)
    }
}

/// A counter shared by threads, for the clients' results.
public final class Counter: @unchecked Sendable {
    private var lock = pthread_mutex_t()
    private var values: [Int64] = [0, 0, 0]

    public init() { pthread_mutex_init(&lock, nil) }

    /// Adds to (done, errors, bytes); returns the new done count.
    @discardableResult
    public func add(done: Int64 = 0, errors: Int64 = 0, bytes: Int64 = 0) -> Int64 {
        pthread_mutex_lock(&lock)
        defer { pthread_mutex_unlock(&lock) }
        values[0] += done
        values[1] += errors
        values[2] += bytes
        return values[0]
    }

    public var done: Int64 { snapshot().0 }

    public func snapshot() -> (Int64, Int64, Int64) {
        pthread_mutex_lock(&lock)
        defer { pthread_mutex_unlock(&lock) }
        return (values[0], values[1], values[2])
    }

    /// Takes the next index below `limit` (a work queue for N workers), or nil when all are taken.
    public func next(below limit: Int) -> Int? {
        pthread_mutex_lock(&lock)
        defer { pthread_mutex_unlock(&lock) }
        guard values[0] < Int64(limit) else { return nil }
        values[0] += 1
        return Int(values[0] - 1)
    }
}
