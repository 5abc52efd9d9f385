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

/// Which files curlq runs at once and in what order: -j, --per-host, order and priorities.
@Suite struct CurlqSchedulingTests {
    @Test func jobsAndPerHostLimitConcurrency() async throws {
        try await withServer { server in
            try await withFolder { folder in
                // The first URL to a host answers at once: transfers to a host wait for its first
                // answer before opening more connections. The others are held at a gate until two
                // are in flight at once (an event, not a delay that a loaded machine may outlast):
                // with -j 2 the third cannot start before one of them ends.
                let warmUp = server.url("/bytes/1").absoluteString
                let held = (1...4).map { server.url("/gate/two?n=\($0)").absoluteString }
                let two = try CurlqProcess(["get", "-d", folder.appendingPathComponent("a").path, "-j", "2", warmUp] + held)
                try await server.waitForRequests(pathPrefix: "/gate/two", count: 2)
                server.openGate("two")
                let twoRun = await two.finish()
                #expect(twoRun.status == 0, "\(twoRun)")
                #expect(server.peakConcurrency == 2)

                server.resetStatistics()
                let local = { (url: String) in url.replacingOccurrences(of: "127.0.0.1", with: "localhost") }
                let perHostURLs = (1...4).map { server.url("/gate/host?n=\($0)").absoluteString }
                let twoHosts = [warmUp, local(warmUp)] + perHostURLs[0...1] + perHostURLs[2...3].map(local)
                let perHost = try CurlqProcess(["get", "-d", folder.appendingPathComponent("b").path, "-j", "4", "--per-host", "1"] + twoHosts)
                try await server.waitForRequests(pathPrefix: "/gate/host", count: 2)
                let firstTwo = server.requests.filter { $0.path == "/gate/host" }.compactMap { $0.header("Host") }
                #expect(Set(firstTwo.prefix(2).map { $0.hasPrefix("localhost") }).count == 2, "one per host: \(firstTwo)")
                server.openGate("host")
                let perHostRun = await perHost.finish()
                #expect(perHostRun.status == 0, "\(perHostRun)")
                #expect(server.peakConcurrency == 2, "one transfer per host, two hosts")

                // -j 0: five gated requests all in flight at once. Each goes to a server of its own,
                // as transfers to one host wait for its first answer before opening more connections.
                var servers: [FixtureServer] = []
                for _ in 0..<5 { servers.append(try await FixtureServer.start()) }
                let process = try CurlqProcess(["get", "-d", folder.appendingPathComponent("c").path, "-j", "0"]
                                               + servers.map { $0.url("/gate/all").absoluteString })
                for gated in servers { try await gated.waitForRequests(pathPrefix: "/gate/", count: 1) }
                for gated in servers { gated.openGate("all") }
                let unlimited = await process.finish()
                for gated in servers { try await gated.shutdown() }
                #expect(unlimited.status == 0, "\(unlimited)")
                #expect(files(in: folder.appendingPathComponent("c")) == ["all", "all.1", "all.2", "all.3", "all.4"])
            }
        }
    }

    @Test func orderAndPriorities() async throws {
        try await withServer { server in
            try await withFolder { folder in
                func startOrder(_ arguments: [String], input: String? = nil) async throws -> [String] {
                    server.resetStatistics()
                    let run = try await curlq(["get", "-j", "1", "--overwrite", "-d", folder.path] + arguments, input: input)
                    #expect(run.status == 0, "\(run)")
                    return server.requests.compactMap { $0.uri.split(separator: "n=").last.map(String.init) }
                }
                let urls = ["a", "b", "c", "d"].map { server.url("/bytes/10?n=\($0)").absoluteString }
                let plain = try await startOrder(urls)
                let fifo = try await startOrder(["--order", "fifo"] + urls)
                let lifo = try await startOrder(["--order", "lifo"] + urls)
                #expect(plain == ["a", "b", "c", "d"])
                #expect(fifo == ["a", "b", "c", "d"])
                #expect(lifo == ["d", "c", "b", "a"])
                let input = """
                    \(urls[0])
                      priority=low
                    \(urls[1])
                    \(urls[2])
                      priority=high
                    \(urls[3])
                    """
                let byPriority = try await startOrder(["-i", "-"], input: input)
                let byPriorityLIFO = try await startOrder(["-i", "-", "--order", "lifo"], input: input)
                #expect(byPriority == ["c", "b", "d", "a"])
                #expect(byPriorityLIFO == ["c", "d", "b", "a"])
            }
        }
    }
}
