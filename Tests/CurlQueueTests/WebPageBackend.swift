import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What the web page talks to in WebPageBrowserTests: an aria2 JSON-RPC server, where the
/// page is served, and where downloads land: `aria2c --enable-rpc` with the page from a static
/// server (``start(in:concurrency:)``), or `curlq daemon --enable-rpc`, which serves the page
/// itself at `/` (``startDaemon(in:concurrency:)``).
struct WebPageBackend: Sendable {
    /// The JSON-RPC endpoint (`http://127.0.0.1:PORT/jsonrpc`).
    var rpcURL: URL
    /// The page, pointed at ``rpcURL``.
    var pageURL: URL
    /// The RPC secret (`--rpc-secret`); the test types it into the page.
    var secret: String
    /// The folder downloads are written to.
    var downloads: URL
    /// The processes to stop at the end.
    var processes: [WatchedProcess]

    static let aria2c = "/usr/bin/aria2c"

    /// The page's folder in this checkout: Sources/curlq/Web.
    static var webFolder: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/curlq/Web")
    }

    /// Starts aria2c (downloads into `folder`/downloads, at most `concurrency` at a time) and
    /// a static server for the page (Python's http.server: the page needs no more than files).
    static func start(in folder: URL, concurrency: Int = 2) async throws -> WebPageBackend {
        guard FileManager.default.isExecutableFile(atPath: aria2c) else {
            throw WebDriverError.unexpected("aria2c is not installed (scripts/setup installs Debian's aria2)")
        }
        let downloads = folder.appendingPathComponent("downloads")
        try FileManager.default.createDirectory(at: downloads, withIntermediateDirectories: true)
        let secret = UUID().uuidString
        let page = try WatchedProcess(try python3(), [
            "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", webFolder.path,
        ])
        let pagePort = try await page.waitForLine { line -> Int? in
            guard let range = line.range(of: "Serving HTTP on 127.0.0.1 port ") else { return nil }
            return Int(line[range.upperBound...].prefix { $0.isNumber })
        }
        // aria2c takes no port 0: a port is picked (``aria2cPort()``), and another one tried
        // should it be taken.
        var lastError: any Error = WebDriverError.unexpected("aria2c did not start")
        for _ in 0..<5 {
            let port = Self.aria2cPort()
            let rpc = try WatchedProcess(aria2c, [
                "--no-conf", "--enable-rpc", "--rpc-listen-port=\(port)", "--rpc-secret=\(secret)",
                "--rpc-allow-origin-all",  // the page is served from another port: CORS for its POST fallback
                "--dir=\(downloads.path)", "--max-concurrent-downloads=\(concurrency)",
                "--max-tries=1", "--file-allocation=none", "--auto-file-renaming=false",
                "--stop-with-process=\(getpid())",  // gone with the test process, should it crash
                // IPv4 only: a port another test's server took meanwhile makes aria2c exit (and
                // another port is tried) instead of listening on ::1 alone while 127.0.0.1:PORT
                // answers as that server.
                "--disable-ipv6=true",
                "--log=-", "--log-level=notice", "--console-log-level=warn",
            ])
            do {
                try await rpc.waitForLine { $0.contains("RPC: listening on TCP port \(port)") ? true : nil }
                let rpcURL = URL(string: "http://127.0.0.1:\(port)/jsonrpc")!
                var components = URLComponents(string: "http://127.0.0.1:\(pagePort)/index.html")!
                components.queryItems = [URLQueryItem(name: "rpc", value: rpcURL.absoluteString)]
                let backend = WebPageBackend(rpcURL: rpcURL, pageURL: components.url!, secret: secret,
                                             downloads: downloads, processes: [page, rpc])
                // aria2c, not another test's server on a port taken meanwhile: its own answer.
                _ = try await backend.call("getVersion", [])
                return backend
            } catch {
                rpc.stop()
                lastError = error
            }
        }
        page.stop()
        throw lastError
    }

    /// Starts `curlq daemon --enable-rpc` on a new SQLite store, downloading into
    /// `folder`/downloads; the page is the daemon's own, at its root.
    static func startDaemon(in folder: URL, concurrency: Int = 2) async throws -> WebPageBackend {
        let downloads = folder.appendingPathComponent("downloads")
        try FileManager.default.createDirectory(at: downloads, withIntermediateDirectories: true)
        let secret = UUID().uuidString
        let daemon = try WatchedProcess(builtProduct("curlq").path, [
            "daemon", "--store", "sqlite:" + folder.appendingPathComponent("jobs.db").path, "-d", downloads.path,
            "-j", String(concurrency), "--enable-rpc", "--rpc-listen-port", "0", "--rpc-secret", secret,
        ])
        let rpcURL = try await daemon.waitForLine { line -> URL? in
            guard let range = line.range(of: "aria2 JSON-RPC at ") else { return nil }
            return URL(string: String(line[range.upperBound...].prefix { $0 != "," && $0 != " " }))
        }
        let pageURL = rpcURL.deletingLastPathComponent()
        return WebPageBackend(rpcURL: rpcURL, pageURL: pageURL, secret: secret, downloads: downloads, processes: [daemon])
    }

    func stop() {
        for process in processes { process.stop() }
    }

    /// Calls `aria2.METHOD` over HTTP POST with the secret and returns its `result`.
    func call(_ method: String, _ params: [Any]) async throws -> Any? {
        let body: [String: Any] = ["jsonrpc": "2.0", "id": "test", "method": "aria2.\(method)",
                                   "params": ["token:\(secret)"] + params]
        var request = Request(url: rpcURL, method: .post, body: .bytes(try JSONSerialization.data(withJSONObject: body)))
        request.headerFields[.contentType] = "application/json"
        let response = try await RequestOperation(request: request).response()
        let answer = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
        if let error = answer?["error"] { throw WebDriverError.unexpected("aria2.\(method): \(error)") }
        return answer?["result"] ?? nil
    }

    /// python3 from PATH (scripts/check-docs needs it too).
    private static func python3() throws -> String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for folder in path.split(separator: ":") where FileManager.default.isExecutableFile(atPath: "\(folder)/python3") {
            return "\(folder)/python3"
        }
        throw WebDriverError.unexpected("python3 is not installed: it serves the page to the browser")
    }

    /// A port for aria2c, which takes no port 0: at random below the kernel's ephemeral range
    /// (32768 and up, where every `bind` to port 0 of the parallel suite lands), so that no
    /// test's server takes it meanwhile. A port found free by binding and closing one was, on a
    /// loaded machine, still held by the closing socket or taken again when aria2c bound it.
    /// aria2c exits on a taken port (IPv4 only), and another is tried.
    static func aria2cPort() -> Int { Int.random(in: 20_000..<32_000) }
}
