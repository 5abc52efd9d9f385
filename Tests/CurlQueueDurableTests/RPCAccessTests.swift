import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing
@testable import curlq

/// Requests a browser could be tricked into sending: a `Host` that is not a loopback name (DNS
/// rebinding) and an `Origin` of another site are refused (403) before any method runs, over
/// HTTP and for the WebSocket upgrade.
@Suite struct RPCAccessTests {
    @Test func aForeignHostOrOriginIsRefusedAndTheServersOwnIsServed() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let store = "sqlite:" + folder.appendingPathComponent("jobs.db").path
                let daemon = try RPCDaemonProcess(store: store, folder: folder.appendingPathComponent("files"))
                let port = daemon.port
                let add = #"{"jsonrpc":"2.0","id":1,"method":"aria2.addUri","params":[["\#(server.url("/bytes/10").absoluteString)"]]}"#
                let refused: [[String: String]] = [
                    ["Host": "evil.example:\(port)"],
                    ["Host": "127.0.0.1.evil.example"],
                    ["Host": "127.0.0.1:\(port)", "Origin": "http://evil.example"],
                    ["Host": "127.0.0.1:\(port)", "Origin": "null"],
                    ["Host": "localhost:\(port)", "Origin": "http://127.0.0.1:\(port)"],
                ]
                for headers in refused {
                    let response = try await rpcPost(port: port, add, headers: headers)
                    #expect(response.status == 403, "\(headers): \(response)")
                }
                let stat = #"{"jsonrpc":"2.0","id":1,"method":"aria2.getGlobalStat","params":[]}"#
                let counts = try await rpcPost(port: port, stat).json()["result"] as? [String: String]
                #expect(counts?["numWaiting"] == "0" && counts?["numStopped"] == "0" && counts?["numActive"] == "0",
                        "no refused call added a job: \(String(describing: counts))")
                for headers in [["Host": "localhost:\(port)"], ["Host": "[::1]:\(port)"],
                                ["Host": "127.0.0.1:\(port)", "Origin": "http://127.0.0.1:\(port)"]] {
                    let response = try await rpcPost(port: port, stat, headers: headers)
                    #expect(response.status == 200, "\(headers): \(response)")
                }
                let upgrades: [(host: String, origin: String?, expected: Int)] = [
                    ("evil.example", nil, 403), ("127.0.0.1:\(port)", "http://evil.example", 403), ("127.0.0.1:\(port)", nil, 101),
                ]
                for upgrade in upgrades {
                    let status = try await offThePool { try RawConnection(port: port).upgrade(host: upgrade.host, origin: upgrade.origin) }
                    #expect(status == upgrade.expected, "\(upgrade)")
                }
                #expect(try await daemon.stop() == 0)
            }
        }
    }

    @Test func loopbackNamesAreTheOnlyHostsTakenOnLoopback() {
        for host in ["127.0.0.1", "127.0.0.1:6800", "localhost", "LOCALHOST:1", "[::1]", "[::1]:6800", "127.1.2.3:80"] {
            #expect(RPCAccess.isLoopback(host: host), "\(host)")
        }
        for host in ["", "evil.example", "127.0.0.1.evil.example", "localhost.evil", "[::2]", "[::1]x", "127.0.0.1:abc",
                     "128.0.0.1", "127.0.0.1:", "127.0.0.256", "0.0.0.0"] {
            #expect(!RPCAccess.isLoopback(host: host), "\(host)")
        }
    }
}
