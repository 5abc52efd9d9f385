import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// `aria2.addUri` through `curlq daemon --enable-rpc`: the download lands in the daemon's
/// folder under `out`, `tellStatus` follows it to `complete` with aria2's keys and types, and
/// `getVersion` answers.
@Suite struct RPCAddUriTests {
    @Test func addUriDownloadsAndTellStatusFollowsItToComplete() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let store = "sqlite:" + folder.appendingPathComponent("jobs.db").path
                let files = folder.appendingPathComponent("files")
                let daemon = try RPCDaemonProcess(store: store, folder: files)
                let port = daemon.port
                let url = server.url("/bytes/3000").absoluteString
                let gid = try #require(try await rpcResult(port: port, "aria2.addUri", #"[["\#(url)"],{"out":"a.bin","split":"4"}]"#) as? String)
                #expect(gid == "0000000000000001", "the GID is the job id in 16 hex digits")
                var status: [String: Any] = [:]
                let done = try await pollStore {
                    status = try #require(try await rpcResult(port: port, "aria2.tellStatus", #"["\#(gid)"]"#) as? [String: Any])
                    return status["status"] as? String == "complete"
                }
                #expect(done, "\(status)")
                #expect(contents(of: files.appendingPathComponent("a.bin")) == FixtureServer.expectedBytes(count: 3000))
                #expect(status["gid"] as? String == gid)
                #expect(status["totalLength"] as? String == "3000" && status["completedLength"] as? String == "3000", "\(status)")
                #expect(status["errorCode"] as? String == "0")
                let filesList = try #require(status["files"] as? [[String: Any]])
                #expect(filesList.first?["path"] as? String == files.appendingPathComponent("a.bin").path)
                let uris = try #require(filesList.first?["uris"] as? [[String: Any]])
                #expect(uris.first?["uri"] as? String == url)
                // Every value aria2 gives as a string is a string here too.
                for key in ["totalLength", "completedLength", "uploadLength", "downloadSpeed", "uploadSpeed", "connections", "dir"] {
                    #expect(status[key] is String, "\(key): \(String(describing: status[key]))")
                }
                let filtered = try #require(try await rpcResult(port: port, "aria2.tellStatus", #"["\#(gid)",["gid","status"]]"#) as? [String: Any])
                #expect(Set(filtered.keys) == ["gid", "status"])

                let version = try #require(try await rpcResult(port: port, "aria2.getVersion") as? [String: Any])
                #expect(version["version"] is String && version["enabledFeatures"] is [String])

                let missing = try await rpcCall(port: port, "aria2.tellStatus", #"["00000000000000ff"]"#)
                #expect((missing["error"] as? [String: Any])?["message"] as? String == "GID 00000000000000ff is not found")
                let invalid = try await rpcCall(port: port, "aria2.tellStatus", #"["zz"]"#)
                #expect((invalid["error"] as? [String: Any])?["message"] as? String == "Invalid GID zz")
                #expect(try await daemon.stop() == 0)
            }
        }
    }

    /// Several URIs are mirrors of one file: the first server's 404 sends the job to the next,
    /// and both are listed; `max-download-limit` is the job's own.
    @Test func severalURIsAreMirrorsOfOneFile() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let store = "sqlite:" + folder.appendingPathComponent("jobs.db").path
                let files = folder.appendingPathComponent("files")
                let daemon = try RPCDaemonProcess(store: store, folder: files)
                let port = daemon.port
                let (gone, there) = (server.url("/status/404").absoluteString, server.url("/bytes/3000").absoluteString)
                let gid = try #require(try await rpcResult(
                    port: port, "aria2.addUri", #"[["\#(gone)","\#(there)"],{"out":"m.bin","max-download-limit":"1M"}]"#) as? String)
                var status: [String: Any] = [:]
                let done = try await pollStore {
                    status = try #require(try await rpcResult(port: port, "aria2.tellStatus", #"["\#(gid)"]"#) as? [String: Any])
                    return status["status"] as? String == "complete"
                }
                #expect(done, "\(status)")
                #expect(contents(of: files.appendingPathComponent("m.bin")) == FixtureServer.expectedBytes(count: 3000))
                let uris = try #require(try await rpcResult(port: port, "aria2.getUris", #"["\#(gid)"]"#) as? [[String: Any]])
                #expect(uris.compactMap { $0["uri"] as? String } == [gone, there])
                #expect(server.requests.map(\.path).filter { $0 == "/status/404" || $0 == "/bytes/3000" } == ["/status/404", "/bytes/3000"])
                #expect(try await daemon.stop() == 0)
            }
        }
    }

    func contents(of url: URL) -> [UInt8]? { (try? Data(contentsOf: url)).map(Array.init) }
}
