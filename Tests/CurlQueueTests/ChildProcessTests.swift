import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A process the program starts gets no copy of CurlQueue's connections: a copy would let it
/// read and write them, and would keep one open after the engine closed it.
@Suite struct ChildProcessTests {
    /// The inodes of this process's TCP sockets whose peer listens on `port`.
    func socketInodes(toPort port: Int) -> [String] {
        let peer = String(format: ":%04X", port)
        // Read to the end: `String(contentsOfFile:)` gets only the first page of a /proc file.
        let table = String(decoding: (try? FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/self/net/tcp")).readToEnd()) ?? Data(), as: UTF8.self)
        return table.split(separator: "\n").dropFirst().compactMap { line in
            let columns = line.split(separator: " ")
            guard columns.count > 9, columns[2].hasSuffix(peer) else { return nil }
            return String(columns[9])
        }
    }

    /// What `/proc/self/fd` of a child process started now holds (`ls -l`). Started with
    /// `popen`, which closes nothing the child inherits (as `system`, or fork and exec, do not;
    /// Foundation's `Process` closes what it finds open before it starts the child, racing with
    /// other threads' new descriptors).
    func descriptorsOfAChild() throws -> String {
        let pipe = try #require(popen("ls -l /proc/self/fd/", "r"))
        var output = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&buffer, 1, buffer.count, pipe)
            if count == 0 { break }
            output += buffer[0..<count]
        }
        #expect(pclose(pipe) == 0)
        return String(decoding: output, as: UTF8.self)
    }

    @Test func aChildProcessGetsNoCopyOfAConnection() async throws {
        try await withServer { server in
            let operation = RequestOperation(request: Request(url: server.url("/gate/child-process")))
            async let result = completion(of: operation)
            try await server.waitForRequests(pathPrefix: "/gate/child-process", count: 1)
            let connections = socketInodes(toPort: server.port)
            #expect(!connections.isEmpty)

            // The check sees what a child does inherit: a socket made without close-on-exec.
            let inheritable = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            #expect(inheritable >= 0)
            defer { close(inheritable) }
            let inheritableInode = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(inheritable)")

            let child = try descriptorsOfAChild()
            #expect(child.contains(inheritableInode), "\(child)")
            for inode in connections {
                #expect(!child.contains("socket:[\(inode)]"), "\(child)")
            }
            server.openGate("child-process")
            #expect((try? await result.get())?.status == .ok)
        }
    }
}
