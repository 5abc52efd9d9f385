import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// Whatever `dir` and `out` say, a download stays inside the daemon's folder: a `dir` outside
/// it is refused, an `out` with `..` or `/` is made a plain safe name, a `dir` inside it is
/// kept; and what the store would keep in the clear (a password in the URL, an Authorization
/// header) is refused, so that no answer can show it.
@Suite struct RPCDestinationTests {
    @Test func dirAndOutNeverLeaveTheDaemonsFolder() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let store = "sqlite:" + folder.appendingPathComponent("jobs.db").path
                let files = folder.appendingPathComponent("files")
                let daemon = try RPCDaemonProcess(store: store, folder: files)
                let port = daemon.port
                let url = server.url("/bytes/64").absoluteString
                for dir in ["/etc", folder.path, files.path + "/../x", "../outside", files.path + "/a/../../x"] {
                    let reply = try await rpcCall(port: port, "aria2.addUri", #"[["\#(url)"],{"dir":"\#(dir)"}]"#)
                    let message = (reply["error"] as? [String: Any])?["message"] as? String
                    #expect(message?.contains("outside the daemon's folder") == true, "\(dir): \(reply)")
                }
                let traversal = try #require(try await rpcResult(port: port, "aria2.addUri", #"[["\#(url)"],{"out":"../../escape"}]"#) as? String)
                let nested = try #require(try await rpcResult(port: port, "aria2.addUri", #"[["\#(url)"],{"dir":"\#(files.path)/sub","out":"n.bin"}]"#) as? String)
                let relative = try #require(try await rpcResult(port: port, "aria2.addUri", #"[["\#(url)"],{"dir":"rel","out":"r.bin"}]"#) as? String)
                for gid in [traversal, nested, relative] {
                    let done = try await pollStore {
                        let status = try await rpcResult(port: port, "aria2.tellStatus", #"["\#(gid)",["status"]]"#) as? [String: Any]
                        return status?["status"] as? String == "complete"
                    }
                    #expect(done, "\(gid)")
                }
                #expect(FileManager.default.fileExists(atPath: files.appendingPathComponent("escape").path), "\(names(in: files))")
                #expect(FileManager.default.fileExists(atPath: files.appendingPathComponent("sub/n.bin").path))
                #expect(FileManager.default.fileExists(atPath: files.appendingPathComponent("rel/r.bin").path))
                #expect(Set(names(in: folder)).subtracting(["jobs.db", "jobs.db-wal", "jobs.db-shm", "jobs.db-workers"]) == ["files"],
                        "nothing beside the daemon's folder: \(names(in: folder))")
                #expect(try await daemon.stop() == 0)
            }
        }
    }

    @Test func secretsInTheURLOrHeadersAreRefusedAndNeverAnswered() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let store = "sqlite:" + folder.appendingPathComponent("jobs.db").path
                let daemon = try RPCDaemonProcess(store: store, folder: folder.appendingPathComponent("files"))
                let port = daemon.port
                let password = "pa55-SECRET"
                let withUser = server.url("/bytes/8").absoluteString.replacingOccurrences(of: "http://", with: "http://alice:\(password)@")
                let signed = server.url("/bytes/8?token=\(password)").absoluteString
                let calls = [
                    #"[["\#(withUser)"]]"#,
                    #"[["\#(signed)"]]"#,
                    #"[["\#(server.url("/bytes/8").absoluteString)"],{"header":["Authorization: Bearer \#(password)"]}]"#,
                    #"[["\#(server.url("/bytes/8").absoluteString)"],{"header":"Cookie: a=\#(password)"}]"#,
                    #"[["not a url \#(password)"]]"#,
                ]
                for params in calls {
                    let response = try await rpcPost(port: port, #"{"jsonrpc":"2.0","id":1,"method":"aria2.addUri","params":\#(params)}"#)
                    let code = (try response.json()["error"] as? [String: Any])?["code"] as? Int
                    #expect(response.status == 400 && code == 1, "\(response)")
                    #expect(!response.body.contains(password), "\(response.body)")
                }
                let stat = try #require(try await rpcResult(port: port, "aria2.getGlobalStat") as? [String: Any])
                #expect(stat["numWaiting"] as? String == "0" && stat["numStopped"] as? String == "0", "nothing stored: \(stat)")
                #expect(try await daemon.stop() == 0)
                #expect(!daemon.printed.contains(password))
            }
        }
    }
}
