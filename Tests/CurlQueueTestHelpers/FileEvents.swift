// Waits for what files show, woken by inotify: the tests wait for events, never for sleeps
// that hope. Shared by every test target (CurlQueueTests, CurlQueueDurableTests, …).
public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Waits, woken by inotify on `folder`, until `condition` holds (true), or `timeout` seconds
/// pass without it (false). `condition` is checked at once, then after each change in the
/// folder (a file created, written, closed, renamed or removed in it). A folder that does not
/// exist yet is watched for from its parent (a worker creates its download folder itself).
///
/// The wait runs on a thread of its own, off Swift's concurrency pool, so that a long wait
/// holds up no other test's task.
public func waitForFolder(_ folder: URL, timeout: Double = 30,
                          until condition: @escaping @Sendable () -> Bool) async -> Bool {
    await withCheckedContinuation { continuation in
        Thread {
            continuation.resume(returning: blockUntil(folder: folder.path, timeout: timeout, condition))
        }.start()
    }
}

/// Waits until a file (of any kind) is at `url`, or `timeout` seconds pass (false).
public func waitForFile(_ url: URL, timeout: Double = 30) async -> Bool {
    await waitForFolder(url.deletingLastPathComponent(), timeout: timeout) {
        FileManager.default.fileExists(atPath: url.path)
    }
}

/// Waits until the file at `path` holds at least `bytes` bytes, or `timeout` seconds pass (false).
public func waitForFile(_ path: String, atLeast bytes: Int64, timeout: Double = 20) async -> Bool {
    await waitForFolder(URL(fileURLWithPath: path).deletingLastPathComponent(), timeout: timeout) {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.int64Value ?? -1 >= bytes
    }
}

/// Waits until the text of the file at `url` satisfies `matches`, or `timeout` seconds pass (false).
public func waitForFile(_ url: URL, timeout: Double = 30,
                        contentMatches matches: @escaping @Sendable (String) -> Bool) async -> Bool {
    await waitForFolder(url.deletingLastPathComponent(), timeout: timeout) {
        (try? String(contentsOf: url, encoding: .utf8)).map(matches) ?? false
    }
}

/// Waits until the file at `url` holds at least `count` complete lines, or `timeout` seconds
/// pass (false).
public func waitForLines(in url: URL, count: Int, timeout: Double = 30) async -> Bool {
    await waitForFile(url, timeout: timeout) { text in text.reduce(0) { $1 == "\n" ? $0 + 1 : $0 } >= count }
}

/// The names in `folder` (none if it does not exist), for the conditions of `waitForFolder`.
public func names(in folder: URL) -> [String] {
    (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
}

/// The blocking wait behind `waitForFolder`.
private func blockUntil(folder: String, timeout: Double, _ condition: () -> Bool) -> Bool {
    let watcher = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
    guard watcher >= 0 else { return condition() }
    defer { close(watcher) }
    let changes = UInt32(IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_CLOSE_WRITE | IN_DELETE | IN_ATTRIB)
    var watching = false
    // The parent too, until the folder exists: its creation is the event that lets it be watched.
    let parent = (folder as NSString).deletingLastPathComponent
    func watch() {
        if !watching { watching = inotify_add_watch(watcher, folder, changes) >= 0 }
        if !watching { _ = inotify_add_watch(watcher, parent, UInt32(IN_CREATE | IN_MOVED_TO)) }
    }
    watch()
    let deadline = Date().addingTimeInterval(timeout)
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        // The watch is in place before the check, so that no change between the two is missed.
        if condition() { return true }
        let remaining = deadline.timeIntervalSinceNow
        if remaining <= 0 { return false }
        var descriptor = pollfd(fd: watcher, events: Int16(POLLIN), revents: 0)
        // Woken by a change; the cap of 1 s only re-checks a condition that inotify cannot
        // see (a file in a subfolder, or a parent made more than one level down).
        if poll(&descriptor, 1, Int32(min(remaining, 1) * 1000) + 1) > 0 {
            while read(watcher, &buffer, buffer.count) > 0 {}
        }
        watch()
    }
}

/// How often and for how long a test polls a store that *another process* changes: SQLite has
/// no cross-process notification, so a bounded poll of the store is the wait there.
public enum StorePoll {
    /// Between two reads of the store.
    public static let interval: Duration = .milliseconds(200)
    /// The bound on the whole wait, generous for a loaded machine under ThreadSanitizer.
    public static let bound: Duration = .seconds(60)
}

/// Reads the store with `check` every `StorePoll.interval` until it holds (true) or
/// `StorePoll.bound` passes (false). Only for state another process changes: in-process state
/// has events (`store.wakeups`, the worker's handlers).
public func pollStore(until check: () async throws -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + StorePoll.bound
    while true {
        if try await check() { return true }
        if ContinuousClock.now >= deadline { return false }
        try await Task.sleep(for: StorePoll.interval)  // the sleep IS the poll: no notification crosses processes
    }
}
