import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// The queue through the RPC: `tellWaiting`/`tellActive`/`tellStopped` with offsets and key
/// filters, `remove`, `pauseAll`/`unpauseAll`, `getGlobalStat`, `getOption`,
/// `changeGlobalOption`, and aria2's refusals for what the store cannot do yet.
@Suite struct RPCQueueTests {
    @Test func theQueueIsListedPausedResumedAndRemovedFrom() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let store = "sqlite:" + folder.appendingPathComponent("jobs.db").path
                let daemon = try RPCDaemonProcess(store: store, folder: folder.appendingPathComponent("files"))
                let port = daemon.port
                #expect(try await rpcResult(port: port, "aria2.pauseAll") as? String == "OK")
                var gids: [String] = []
                for index in 0..<4 {
                    let url = server.url("/bytes/\(100 + index)").absoluteString
                    gids.append(try #require(try await rpcResult(port: port, "aria2.addUri", #"[["\#(url)"],{"out":"f\#(index)"}]"#) as? String))
                }
                let waiting = try #require(try await rpcResult(port: port, "aria2.tellWaiting", #"[0,10,["gid","status"]]"#) as? [[String: String]])
                #expect(waiting.map { $0["gid"] ?? "" } == gids, "in the order they would start: \(waiting)")
                let page = try #require(try await rpcResult(port: port, "aria2.tellWaiting", #"[1,2,["gid"]]"#) as? [[String: String]])
                #expect(page.map { $0["gid"] ?? "" } == Array(gids[1...2]))
                let backwards = try #require(try await rpcResult(port: port, "aria2.tellWaiting", #"[-1,2,["gid"]]"#) as? [[String: String]])
                #expect(backwards.map { $0["gid"] ?? "" } == [gids[3], gids[2]], "a negative offset counts from the end, backwards")
                #expect((try await rpcResult(port: port, "aria2.tellActive", #"[["gid"]]"#) as? [Any])?.isEmpty == true, "paused: none runs")

                #expect(try await rpcResult(port: port, "aria2.remove", #"["\#(gids[0])"]"#) as? String == gids[0])
                let again = try await rpcCall(port: port, "aria2.remove", #"["\#(gids[0])"]"#)
                #expect((again["error"] as? [String: Any])?["message"] as? String == "Active Download not found for GID#\(gids[0])")

                let option = try #require(try await rpcResult(port: port, "aria2.getOption", #"["\#(gids[1])"]"#) as? [String: String])
                #expect(option["out"] == "f1", "\(option)")
                let pause = try await rpcCall(port: port, "aria2.pause", #"["\#(gids[1])"]"#)
                #expect((pause["error"] as? [String: Any])?["code"] as? Int == 1, "one download's pause is refused, not faked: \(pause)")

                #expect(try await rpcResult(port: port, "aria2.changeGlobalOption", #"[{"max-overall-download-limit":"1M"}]"#) as? String == "OK")
                let global = try #require(try await rpcResult(port: port, "aria2.getGlobalOption") as? [String: String])
                #expect(global["max-overall-download-limit"] == String(1 << 20), "\(global)")
                let tooMany = try await rpcCall(port: port, "aria2.changeGlobalOption", #"[{"max-concurrent-downloads":"99"}]"#)
                #expect((tooMany["error"] as? [String: Any])?["code"] as? Int == 1)

                #expect(try await rpcResult(port: port, "aria2.unpauseAll") as? String == "OK")
                let finished = try await pollStore {
                    let stat = try await rpcResult(port: port, "aria2.getGlobalStat") as? [String: String]
                    return stat?["numStopped"] == "4" && stat?["numWaiting"] == "0" && stat?["numActive"] == "0"
                }
                #expect(finished)
                let stopped = try #require(try await rpcResult(port: port, "aria2.tellStopped", #"[0,10,["gid","status"]]"#) as? [[String: String]])
                #expect(Set(stopped.map { $0["gid"] ?? "" }) == Set(gids))
                #expect(stopped.first { $0["gid"] == gids[0] }?["status"] == "removed")
                #expect(stopped.filter { $0["status"] == "complete" }.count == 3, "\(stopped)")
                // Results removed: one, then the rest; a second removal finds nothing.
                #expect(try await rpcResult(port: port, "aria2.removeDownloadResult", #"["\#(gids[0])"]"#) as? String == "OK")
                let gone = try await rpcCall(port: port, "aria2.tellStatus", #"["\#(gids[0])"]"#)
                #expect((gone["error"] as? [String: Any])?["message"] as? String == "GID \(gids[0]) is not found")
                // A job's handler marks it handled just after its outcome: purge until each was.
                let purged = try await pollStore {
                    guard try await rpcResult(port: port, "aria2.purgeDownloadResult") as? String == "OK" else { return false }
                    return (try await rpcResult(port: port, "aria2.tellStopped", "[0,10]") as? [Any])?.isEmpty == true
                }
                #expect(purged)
                #expect(try await daemon.stop() == 0)
            }
        }
    }
}
