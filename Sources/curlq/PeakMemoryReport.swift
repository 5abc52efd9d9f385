import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// For the memory tests: with `CURLQ_REPORT_PEAK_MEMORY=1` in the environment, curlq's last line
/// on standard error is `curlq: peak memory N KiB` (VmHWM, read from /proc/self/status at exit).
///
/// A parent cannot measure this itself: on Linux a child's `ru_maxrss` also counts the memory
/// of the process that spawned it, from before the `exec`.
enum PeakMemoryReport {
    static func installIfRequested() {
        guard ProcessInfo.processInfo.environment["CURLQ_REPORT_PEAK_MEMORY"] == "1" else { return }
        atexit { PeakMemoryReport.write() }
    }

    private static func write() {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
              let kib = line.split(separator: " ").dropFirst().first else { return }
        Output.error("curlq: peak memory \(kib) KiB\n")
    }
}
