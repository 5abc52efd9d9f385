import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// What a download does when the disk fails it: a full file system mid-body, a read-only one,
/// a folder it may not write to. Each runs MemoryProbe (one download with CurlQueue, printing
/// `error=<RequestError>` on failure) in a process of its own: for the file systems, in a
/// mount namespace of its own with a small tmpfs (`unshare --map-root-user --mount`), so that
/// nothing outside it sees the mount; for permissions, as user `nobody` when the tests run as
/// root (root may write anywhere).
@Suite struct DiskErrorTests {
    /// Runs `script` with `/bin/sh` and returns its standard output and exit status.
    static func shell(_ script: String) async throws -> (output: String, status: Int32) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script]
        process.standardError = FileHandle.nullDevice
        return try await runToEnd(process)
    }

    static var probe: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("MemoryProbe").path
    }

    /// Whether this machine lets the tests mount a tmpfs in a namespace of their own.
    static func canMountPrivately() async -> Bool {
        (try? await shell("unshare --map-root-user --mount sh -c 'mount -t tmpfs -o size=4k tmpfs /mnt'").status) == 0
    }

    /// A 200,000-byte download into a 64 KiB tmpfs: `.fileSystem` naming the write that failed
    /// ("No space left on device"); no file under the final name; the `.part` kept holds a
    /// correct prefix of the body, as much as fit.
    @Test(.enabled("needs unshare and a private mount namespace") { await canMountPrivately() })
    func aFullDiskMidBodyIsAFileSystemErrorAndThePartKeepsWhatFit() async throws {
        try await withServer { server in
            let folder = try makeTemporaryFolder()
            defer { try? FileManager.default.removeItem(at: folder) }
            let mountPoint = folder.appendingPathComponent("small").path
            let saved = folder.appendingPathComponent("saved.part").path
            try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: false)
            let (output, status) = try await Self.shell("""
                unshare --map-root-user --mount sh -c '
                    mount -t tmpfs -o size=64k tmpfs \(mountPoint) || exit 3
                    \(Self.probe) \(server.url("/bytes/200000").absoluteString) \(mountPoint)/file
                    echo "probe=$?"
                    echo "files=$(ls -A \(mountPoint) | tr "\\n" " ")"
                    cp \(mountPoint)/file.part \(saved)'
                """)
            #expect(status == 0, "\(output)")
            #expect(output.contains("error=file system: cannot write"), "\(output)")
            #expect(output.contains("No space left on device"), "\(output)")
            #expect(output.contains("probe=1"))
            #expect(output.contains("files=file.part \n"), "\(output)")
            let part = try Data(contentsOf: URL(fileURLWithPath: saved))
            #expect(part.count > 0 && part.count <= 65_536)
            #expect(part == Data(FixtureServer.expectedBytes(count: part.count)))
        }
    }

    /// A destination on a read-only file system: `.fileSystem` ("Read-only file system") and
    /// nothing written.
    @Test(.enabled("needs unshare and a private mount namespace") { await canMountPrivately() })
    func aReadOnlyFileSystemIsAFileSystemErrorAndNothingIsWritten() async throws {
        try await withServer { server in
            let folder = try makeTemporaryFolder()
            defer { try? FileManager.default.removeItem(at: folder) }
            let mountPoint = folder.appendingPathComponent("readonly").path
            try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: false)
            let (output, status) = try await Self.shell("""
                unshare --map-root-user --mount sh -c '
                    mount -t tmpfs -o ro,size=64k tmpfs \(mountPoint) || exit 3
                    \(Self.probe) \(server.url("/bytes/2000").absoluteString) \(mountPoint)/file
                    echo "probe=$?"
                    echo "files=$(ls -A \(mountPoint) | tr "\\n" " ")"'
                """)
            #expect(status == 0, "\(output)")
            #expect(output.contains("error=file system: cannot open"), "\(output)")
            #expect(output.contains("Read-only file system"), "\(output)")
            #expect(output.contains("probe=1"))
            #expect(output.contains("files=\n"), "\(output)")
        }
    }

    /// A folder the process may not write to (mode 555, or root's 755 folder for `nobody`):
    /// `.fileSystem` ("Permission denied") and nothing written.
    @Test func aFolderWithoutWritePermissionIsAFileSystemErrorAndNothingIsWritten() async throws {
        try await withServer { server in
            let folder = try makeTemporaryFolder()
            defer {
                try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: folder.path)
                try? FileManager.default.removeItem(at: folder)
            }
            try FileManager.default.setAttributes([.posixPermissions: 0o555], ofItemAtPath: folder.path)
            let asNobody = getuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : ""
            let (output, _) = try await Self.shell("""
                \(asNobody)\(Self.probe) \(server.url("/bytes/2000").absoluteString) \(folder.path)/file
                echo "probe=$?"
                """)
            #expect(output.contains("error=file system: cannot open"), "\(output)")
            #expect(output.contains("Permission denied"), "\(output)")
            #expect(output.contains("probe=1"))
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty)
        }
    }
}
