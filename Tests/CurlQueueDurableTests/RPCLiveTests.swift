import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// What `curlq daemon --enable-rpc` tells of its own jobs while they run, and its metrics:
/// `tellStatus` gives a running download's bytes as its transfer reports them (not only at
/// the 15 s heartbeat), and `GET /metrics` is Prometheus text with the transfers and the
/// store's counts.
@Suite struct RPCLiveTests {
    @Test func aRunningDownloadsBytesAreLiveAndMetricsAreScraped() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let store = "sqlite:" + folder.appendingPathComponent("jobs.db").path
                let daemon = try RPCDaemonProcess(store: store, folder: folder.appendingPathComponent("files"))
                let port = daemon.port
                // Held at 256 KiB until the gate opens: the heartbeat (every 15 s) has not come
                // when the bytes are seen.
                let url = server.url("/bytes/1048576?holdAt=262144&gate=live").absoluteString
                let gid = try #require(try await rpcResult(port: port, "aria2.addUri", #"[["\#(url)"]]"#) as? String)
                let started = ContinuousClock.now
                var status: [String: Any] = [:]
                let seen = try await pollStore {
                    status = try #require(try await rpcResult(port: port, "aria2.tellStatus", #"["\#(gid)"]"#) as? [String: Any])
                    return status["completedLength"] as? String == "262144"
                }
                #expect(seen && ContinuousClock.now - started < .seconds(10), "\(status)")
                #expect(status["status"] as? String == "active" && status["totalLength"] as? String == "1048576", "\(status)")
                server.openGate("live")
                let done = try await pollStore {
                    status = try #require(try await rpcResult(port: port, "aria2.tellStatus", #"["\#(gid)"]"#) as? [String: Any])
                    return status["status"] as? String == "complete"
                }
                #expect(done, "\(status)")

                let scrape = try await offThePool {
                    let connection = try RawConnection(port: port)
                    connection.send("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n")
                    return connection.response()
                }
                let text = scrape?.body ?? ""
                #expect(scrape?.status == 200 && scrape?.header("Content-Type")?.hasPrefix("text/plain; version=0.0.4") == true, "\(String(describing: scrape))")
                #expect(text.contains(#"curlqueue_durable_jobs{queue="default",state="completed"} 1"#), "\(text)")
                #expect(text.contains("curlqueue_requests_finished_total{"), "\(text)")
                #expect(!text.contains("/bytes/"), "no URL in a label")
                #expect(try await daemon.stop() == 0)
            }
        }
    }
}
