import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// `curlq daemon --metrics-listen` serves the RPC's Prometheus text at `/metrics` on a listener
/// of its own, without `--enable-rpc`, and nothing else there; a HOST that is not loopback is
/// refused unless `--metrics-listen-all` says so.
@Suite struct MetricsListenerTests {
    private func scrape(_ port: Int, path: String = "/metrics", method: String = "GET", host: String? = nil) async throws -> RawResponse? {
        try await offThePool {
            let connection = try RawConnection(port: port)
            connection.send("\(method) \(path) HTTP/1.1\r\nHost: \(host ?? "127.0.0.1:\(port)")\r\nContent-Length: 0\r\n\r\n")
            return connection.response()
        }
    }

    @Test func metricsAreScrapedWithoutTheRPCWhileTheDaemonDownloads() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let store = "sqlite:" + folder.appendingPathComponent("jobs.db").path
                let enqueue = Process()
                enqueue.executableURL = builtProduct("curlq")
                enqueue.arguments = ["enqueue", "--store", store,
                                     server.url("/bytes/1000?n=1").absoluteString, server.url("/bytes/2000?n=2").absoluteString,
                                     server.url("/status/404").absoluteString]
                #expect(try await runToEnd(enqueue).status == 0)
                let daemon = try RPCDaemonProcess(store: store, folder: folder.appendingPathComponent("files"), listener: .metrics)
                let port = daemon.port
                #expect(!daemon.printed.contains("JSON-RPC"), "\(daemon.printed)")

                var text = ""
                let counted = try await pollStore {
                    let response = try await scrape(port)
                    #expect(response?.status == 200 && response?.header("Content-Type")?.hasPrefix("text/plain; version=0.0.4") == true,
                            "\(String(describing: response))")
                    text = response?.body ?? ""
                    return text.contains(#"curlqueue_durable_jobs{queue="default",state="completed"} 2"#)
                        && text.contains(#"curlqueue_durable_jobs{queue="default",state="failed"} 1"#)
                }
                #expect(counted, "\(text)")
                // The transfers themselves, from the queue's swift-metrics.
                #expect(text.contains(#"status_class="2xx""#) && text.contains(#"status_class="4xx""#), "\(text)")
                #expect(text.contains("curlqueue_response_body_bytes_received_total"), "\(text)")
                #expect(!text.contains("/bytes/"), "no URL in a label")

                // Nothing but /metrics there: no RPC, no page; a Host that is not loopback is refused.
                #expect(try await scrape(port, path: "/jsonrpc", method: "POST")?.status == 404)
                #expect(try await scrape(port, path: "/")?.status == 404)
                #expect(try await scrape(port, host: "metrics.example:\(port)")?.status == 403)
                #expect(try await daemon.stop() == 0)
            }
        }
    }

    @Test func anAddressThatIsNotLoopbackIsRefusedUnlessAllowed() async throws {
        try await withFolder { folder in
            for (arguments, words) in [
                (["--metrics-listen", "0.0.0.0:0"], "is not a loopback address: add --metrics-listen-all"),
                (["--metrics-listen", "10.1.2.3:9100"], "is not a loopback address"),
                (["--metrics-listen", "localhost:99999"], "--metrics-listen takes PORT or HOST:PORT"),
                (["--metrics-listen-all"], "--metrics-listen-all needs --metrics-listen"),
            ] {
                let process = Process()
                process.executableURL = builtProduct("curlq")
                process.arguments = ["daemon", "--store", "sqlite:" + folder.appendingPathComponent("jobs.db").path, "-d", folder.path]
                    + arguments
                let errors = Pipe()
                process.standardError = errors
                process.standardOutput = FileHandle.nullDevice
                try process.run()
                // A daemon that took the address runs until stopped: killed after 30 s, a failure, not a hang.
                let status = try await waitForExit(of: process, within: .seconds(30))
                let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                #expect(status == 2, "\(arguments): a usage error, status \(String(describing: status))")
                #expect(message.contains(words), "\(arguments): \(message)")
                #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("jobs.db").path), "nothing was opened")
            }
        }
    }

    @Test func everyAddressIsTakenWhenAllowed() async throws {
        try await withFolder { folder in
            let daemon = try RPCDaemonProcess(store: "sqlite:" + folder.appendingPathComponent("jobs.db").path,
                                              folder: folder.appendingPathComponent("files"),
                                              listener: .metrics, arguments: ["--metrics-listen", "0.0.0.0:0", "--metrics-listen-all"])
            // Any Host is taken there (it is not a loopback-only listener).
            let response = try await scrape(daemon.port, host: "metrics.example:\(daemon.port)")
            #expect(response?.status == 200, "\(String(describing: response))")
            #expect(try await daemon.stop() == 0)
        }
    }
}
