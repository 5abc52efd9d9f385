import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// The engine's thread is one the system can tell apart from the others.
@Suite struct EngineThreadTests {
    /// `top -H`, `perf` and debuggers show the name the kernel holds (`/proc/…/comm`), not
    /// Foundation's `Thread.name`, which on Linux stays inside Foundation.
    @Test func theEngineThreadIsNamedForTheSystem() async throws {
        try await withServer { server in
            _ = try await RequestOperation(request: Request(url: server.url("/bytes/1"))).response()
            let tasks = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")
            let names = tasks.compactMap { try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8) }
            #expect(names.contains("CurlQueueEngine\n"), "\(names)")
        }
    }
}
