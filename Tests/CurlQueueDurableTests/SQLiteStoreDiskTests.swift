import CurlQueueDurable
import CurlQueueTestHelpers
import Foundation
import Testing

@testable import CurlQueueSQLite

/// The SQLite store on a full disk and on a read-only one, for real: a probe process in a
/// private mount namespace (`unshare -m`) with its store on a 1 MiB tmpfs that the test fills
/// and remounts read-only. Needs root (mounting); without it the test says why and stops,
/// except under CI=true, where that is a failure.
@Suite(.timeLimit(.minutes(2))) struct SQLiteStoreDiskTests {
    static let probe = builtProduct("DurableWorkerProbe")

    /// The probe, started in its own mount namespace on a tmpfs at `mount`.
    final class DiskProbe: @unchecked Sendable {
        // @unchecked Sendable: one test drives it, one command at a time (each send awaits its
        // answer before the next), so `buffer` is never touched by two threads at once.
        let process = Process()
        private let input = Pipe()
        private let output = Pipe()
        private var buffer: [UInt8] = []

        init(mount: String, size: String) throws {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
            process.arguments = [
                "-m", "--propagation", "private", "sh", "-c",
                "mount -t tmpfs -o size=$2,mode=0700 tmpfs \"$0\" && echo mounted && exec \"$1\" disk \"$0/jobs.sqlite\"",
                mount, SQLiteStoreDiskTests.probe.path, size,
            ]
            process.standardInput = input
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.run()
        }

        /// One line of the probe's output (blocking: called off the pool).
        func line() -> String? {
            var byte: UInt8 = 0
            while true {
                if let newline = buffer.firstIndex(of: 10) {
                    let line = String(decoding: buffer[..<newline], as: UTF8.self)
                    buffer.removeSubrange(...newline)
                    return line
                }
                guard read(output.fileHandleForReading.fileDescriptor, &byte, 1) == 1 else { return nil }
                buffer.append(byte)
            }
        }

        /// Sends a command and returns its answer.
        func send(_ command: String) async throws -> String {
            input.fileHandleForWriting.write(Data((command + "\n").utf8))
            return try await offThePool { [self] in line() ?? "eof" }
        }

        /// The mount as this process sees it: through the probe's root, in its namespace.
        func path(_ mount: String) -> String { "/proc/\(process.processIdentifier)/root\(mount)" }

        /// Runs `mount` arguments in the probe's namespace.
        func remount(_ options: String, _ mount: String) throws -> Int32 {
            let nsenter = Process()
            nsenter.executableURL = URL(fileURLWithPath: "/usr/bin/nsenter")
            nsenter.arguments = ["-t", String(process.processIdentifier), "-m", "mount", "-o", "remount,\(options)", mount]
            try nsenter.run()
            nsenter.waitUntilExit()
            return nsenter.terminationStatus
        }

        func stop() {
            try? input.fileHandleForWriting.close()
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
    }

    /// Whether this machine can run the test; the reason when not.
    static func unavailable() -> String? {
        if getuid() != 0 { return "not root: a tmpfs cannot be mounted" }
        for tool in ["/usr/bin/unshare", "/usr/bin/nsenter"] where !FileManager.default.isExecutableFile(atPath: tool) {
            return "\(tool) is missing"
        }
        return nil
    }

    /// Fills the file system under `folder` (as seen through the probe) until no byte more fits.
    static func fill(_ folder: String) -> Int {
        let descriptor = open(folder + "/fill", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return 0 }
        defer { close(descriptor) }
        let chunk = [UInt8](repeating: 0xAB, count: 4096)
        var total = 0
        while true {
            let written = chunk.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            guard written > 0 else { break }
            total += written
        }
        return total
    }

    /// `PRAGMA integrity_check` of a copy of the store (file and WAL), taken while the probe
    /// is idle between commands.
    static func integrity(of database: String, copyIn folder: URL) throws -> String {
        let copy = folder.appendingPathComponent("copy-\(UUID().uuidString).sqlite").path
        for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: database + suffix) {
            try FileManager.default.copyItem(atPath: database + suffix, toPath: copy + suffix)
        }
        let connection = try SQLiteConnection(path: copy, busyTimeoutMilliseconds: 1000)
        return try connection.query("PRAGMA integrity_check").first?.decode("integrity_check", as: String.self) ?? "no answer"
    }

    @Test func aFullDiskOrAReadOnlyStoreGivesAClearErrorAndWritesNothingHalfway() async throws {
        if let reason = Self.unavailable() {
            if ProcessInfo.processInfo.environment["CI"] == "true" {
                Issue.record("cannot run under CI: \(reason)")
            } else {
                print("SQLiteStoreDiskTests skipped: \(reason)")
            }
            return
        }
        try await withFolder { folder in
            let mount = folder.appendingPathComponent("mnt").path
            try FileManager.default.createDirectory(atPath: mount, withIntermediateDirectories: true)
            let probe = try DiskProbe(mount: mount, size: "1m")
            defer { probe.stop() }
            #expect(try await offThePool { probe.line() } == "mounted")
            let disk = probe.path(mount)
            let database = disk + "/jobs.sqlite"

            #expect(try await probe.send("open") == "ok")
            #expect(try await probe.send("enqueue 4") == "ok")
            #expect(try await probe.send("claim") == "ok 4")

            // Full: a finish and an enqueue fail with SQLite's "disk is full", and change nothing.
            let filled = Self.fill(disk)
            #expect(filled > 64 * 1024)
            let finish = try await probe.send("finish")
            #expect(finish.hasPrefix("error") && finish.contains("disk is full"), "\(finish)")
            // Room for a few jobs but not for 50: the batch is all or nothing.
            #expect(truncate(disk + "/fill", off_t(filled - 64 * 1024)) == 0)
            let enqueue = try await probe.send("enqueue 50")
            #expect(enqueue.hasPrefix("error") && enqueue.contains("disk is full"), "\(enqueue)")
            #expect(try await probe.send("counts") == "ok running=4", "nothing half-written")
            #expect(try Self.integrity(of: database, copyIn: folder) == "ok")

            // Space again: the same calls succeed.
            try FileManager.default.removeItem(atPath: disk + "/fill")
            #expect(try await probe.send("finish") == "ok")
            #expect(try await probe.send("enqueue 50") == "ok")
            #expect(try await probe.send("counts") == "ok available=50 completed=4")

            // Read-only: the file system is remounted read-only once the store is closed (a
            // file open for writing would keep it from it). Opening the store then fails
            // clearly; once writable again, it opens with every job as it was.
            #expect(try await probe.send("close") == "ok")
            #expect(try probe.remount("ro", mount) == 0)
            let reopen = try await probe.send("open")
            #expect(reopen.hasPrefix("error") && reopen.contains("Read-only file system"), "\(reopen)")
            #expect(try await probe.send("enqueue 1") == "error no store open")
            #expect(try probe.remount("rw", mount) == 0)
            #expect(try await probe.send("open") == "ok")
            #expect(try await probe.send("counts") == "ok available=50 completed=4")
            #expect(try await probe.send("enqueue 1") == "ok")
            #expect(try await probe.send("counts") == "ok available=51 completed=4")
            #expect(try Self.integrity(of: database, copyIn: folder) == "ok")
            #expect(try await probe.send("quit") == "eof")
        }
    }
}
