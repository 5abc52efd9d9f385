import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// The engine keeps the connections it finishes with while many others are busy: libcurl's
/// bound on its connection cache counts the busy ones too, and a connection handed back to a
/// cache full of busy ones was closed at once (36 connections for 40 requests, with 300
/// transfers held elsewhere in the process).
@Suite struct ConnectionCacheTests {
    @Test func connectionsAreReusedWhileMoreThan256OthersAreBusy() async throws {
        try await withServer { other in
            // The condition, stated: 300 transfers held open (the server has seen each request).
            let gate = "busy-\(UUID().uuidString)"
            let held = RequestQueue(maxConcurrentRequestCount: 0)
            for index in 0..<300 { held.add(Request(url: other.url("/gate/\(gate)?i=\(index)"))) { _ in } }
            try await other.waitForRequests(pathPrefix: "/gate/", count: 300)
            try await withServer { server in
                let one = RequestQueue(maxConcurrentRequestCount: 2)
                let two = RequestQueue(maxConcurrentRequestCount: 2)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for index in 0..<40 {
                        let queue = index.isMultiple(of: 2) ? one : two
                        group.addTask { _ = try await queue.response(for: Request(url: server.url("/bytes/33?m=\(index)"))) }
                    }
                    try await group.waitForAll()
                }
                let requests = server.requests.filter { $0.path == "/bytes/33" }
                #expect(requests.count == 40)
                let connections = Set(requests.map(\.connectionID)).count
                #expect(connections <= 4, "\(connections) connections for 40 requests at a concurrency of 4")
            }
            other.openGate(gate)
            await held.waitUntilAllOperationsAreFinished()
        }
    }
}
