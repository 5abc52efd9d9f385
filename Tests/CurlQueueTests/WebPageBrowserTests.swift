import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// The daemon's web page (Sources/curlq/Web) in a real browser: headless Chromium through
/// chromedriver, against a real aria2 JSON-RPC server (``WebPageBackend``), downloading from
/// the fixture server. Everything is done as a person would, through the page: the secret
/// typed in, URLs added, buttons clicked; each step waits for what the page shows (the DOM,
/// read through WebDriver until it matches or a deadline passes).
///
/// Not under the sanitizers (scripts/test sets CURLQUEUE_SANITIZER): this process only sends
/// WebDriver and JSON-RPC requests, so instrumenting it finds nothing, while Chromium's start
/// and the page's polling get slower still next to an instrumented suite run one test at a time.
@Suite(
    .enabled(if: WebDriverSession.installed,
             "Chromium is not installed: the Debian packages chromium and chromium-driver (scripts/setup installs them)"),
    .disabled(if: ProcessInfo.processInfo.environment["CURLQUEUE_SANITIZER"] != nil,
              "the browser test runs in the normal phase only (nothing in this process to sanitize)")
)
struct WebPageBrowserTests {
    /// What the page shows of one download.
    struct Shown: Decodable {
        var gid: String
        var section: String
        var name: String
        var figures: String
        var reason: String
        var progress: Double?
        var actions: [String]
    }

    /// What the page shows: its connection line's state and every download, in page order.
    struct PageState: Decodable, CustomStringConvertible {
        var connection: String
        /// The connection line's words (the problem, when there is one).
        var said: String
        var items: [Shown]

        func item(_ name: String) -> Shown? { items.first { $0.name == name } }
        func names(in section: String) -> [String] { items.filter { $0.section == section }.map(\.name) }

        var description: String {
            "connection \(connection) (\(said)); " + items.map { "\($0.name) [\($0.section)] \($0.figures) \($0.reason)" }.joined(separator: "; ")
        }
    }

    static let readPage = """
        const items = [...document.querySelectorAll('#queue li.download')].map((li) => {
          const bar = li.querySelector('progress');
          return { gid: li.dataset.gid, section: li.closest('section.state').id,
                   name: li.querySelector('.name').textContent,
                   figures: li.querySelector('.figures').textContent,
                   reason: li.querySelector('.reason').textContent,
                   progress: bar.hasAttribute('value') ? bar.value : null,
                   actions: [...li.querySelectorAll('button[data-action]')].filter((b) => !b.hidden).map((b) => b.dataset.action) };
        });
        const line = document.getElementById('connection');
        return JSON.stringify({ connection: line.dataset.state, said: line.textContent, items });
        """

    /// Reads the page until `check` gives a value, or fails after `timeout` with what it showed.
    func waitForPage<T>(
        _ browser: WebDriverSession, _ what: String, within timeout: Duration = .seconds(20),
        _ check: (PageState) -> T?
    ) async throws -> T {
        let deadline = ContinuousClock.now + timeout
        var last: PageState?
        while ContinuousClock.now < deadline {
            let state = try JSONDecoder().decode(PageState.self, from: Data(try await browser.evaluate(Self.readPage).utf8))
            if let value = check(state) { return value }
            last = state
            try await Task.sleep(for: .milliseconds(100))  // the next look at the DOM, until the deadline
        }
        throw WebDriverError.unexpected("the page did not show \(what) within \(timeout); it showed: \(last.map(String.init(describing:)) ?? "nothing")")
    }

    /// Adds `url` through the form (with `position` as its priority) and waits until the page
    /// lists it under its name, the URL's last part (the form is empty again by then).
    func add(_ url: URL, position: Int? = nil, _ browser: WebDriverSession) async throws {
        try await browser.type(url.absoluteString, into: "#uris")
        if let position { try await browser.type(String(position), into: "#position") }
        try await browser.click("#add")
        _ = try await waitForPage(browser, "\(url.lastPathComponent) listed") { $0.item(url.lastPathComponent) }
        if position != nil { try await browser.clear("#position") }
    }

    func click(_ action: String, on gid: String, _ browser: WebDriverSession) async throws {
        try await browser.click("li[data-gid=\"\(gid)\"] button[data-action=\"\(action)\"]")
    }

    /// Starts the backend, the fixture server and a browser (running `beforeLoad` on it before
    /// any page is opened), runs `body`, and stops them all, whether `body` throws or not.
    func withPage(
        _ name: String,
        daemon: Bool = false,
        beforeLoad: (WebDriverSession) async throws -> Void = { _ in },
        _ body: (WebDriverSession, WebPageBackend, FixtureServer, URL) async throws -> Void
    ) async throws {
        let started = ContinuousClock.now
        try await withServer { server in
            try await withFolder { folder in
                let backend = daemon
                    ? try await WebPageBackend.startDaemon(in: folder, concurrency: 2)
                    : try await WebPageBackend.start(in: folder, concurrency: 2)
                defer { backend.stop() }
                let browser = try await WebDriverSession.start(in: folder)
                do {
                    try await beforeLoad(browser)
                    try await body(browser, backend, server, folder)
                    await browser.close()
                } catch {
                    await browser.close()
                    throw error
                }
            }
        }
        print("WebPageBrowserTests: \(name) took \(ContinuousClock.now - started)")
    }

    /// Opens the page, sees it refused without the secret, types the secret in and waits until
    /// the page says it is connected over `transport` ("websocket" or "http").
    func signIn(_ browser: WebDriverSession, _ backend: WebPageBackend, over transport: String) async throws {
        try await browser.open(backend.pageURL)
        // Longer deadlines than a step's: the first calls wait for the browser, the page and the
        // server to start, which a loaded machine (the whole suite beside them) slows most.
        _ = try await waitForPage(browser, "the refusal of a call without the secret", within: .seconds(45)) { $0.connection == "error" ? true : nil }
        try await browser.type(backend.secret, into: "#secret")
        try await browser.click("#save-secret")
        _ = try await waitForPage(browser, "a connection over \(transport)", within: .seconds(45)) { $0.connection == transport ? true : nil }
    }

    @Test(.timeLimit(.minutes(3)))
    func addWatchPrioritizePauseCancelAndFailThroughThePage() async throws {
        try await withPage("the WebSocket scenario") { browser, backend, server, folder in
            try await signIn(browser, backend, over: "websocket")
            try await scenario(browser, backend, server, folder)
        }
    }

    /// The page served by `curlq daemon --enable-rpc` itself, driving the daemon: a download
    /// added runs with its progress and completes, a failure shows the daemon's reason, another
    /// download is cancelled. (Pausing one download and reordering the queue are aria2c's only:
    /// the daemon refuses them, docs/daemon.md.)
    @Test(.timeLimit(.minutes(3)))
    func theDaemonsOwnPageAddsWatchesAndCancels() async throws {
        try await withPage("the daemon scenario", daemon: true) { browser, backend, server, _ in
            try await signIn(browser, backend, over: "websocket")
            let size = 2 * 1024 * 1024
            try await add(server.url("/bytes/\(size)?holdAt=\(512 * 1024)&gate=daemon-a"), browser)
            let held = try await waitForPage(browser, "\(size) running with its progress") { state in
                state.item("\(size)").flatMap { $0.section == "active" && ($0.progress ?? 0) > 0 && $0.figures.contains("of 2.0 MiB") ? $0 : nil }
            }
            try await add(server.url("/status/404"), browser)
            let failed = try await waitForPage(browser, "404 failed with its reason") { state in
                state.item("404").flatMap { $0.section == "failed" && !$0.reason.isEmpty ? $0 : nil }
            }
            #expect(failed.reason.contains("HTTP 404 Not Found"), "\(failed.reason)")
            try await add(server.url("/bytes/1048576?holdAt=262144&gate=daemon-b"), browser)
            let other = try await waitForPage(browser, "1048576 running") { state in
                state.item("1048576").flatMap { $0.section == "active" && ($0.progress ?? 0) > 0 ? $0 : nil }
            }
            try await click("remove", on: other.gid, browser)
            _ = try await waitForPage(browser, "1048576 cancelled") { $0.item("1048576")?.section == "removed" ? true : nil }
            server.openGate("daemon-a")
            let done = try await waitForPage(browser, "\(size) done") { state in
                state.item("\(size)").flatMap { $0.section == "done" ? $0 : nil }
            }
            #expect(done.progress == 100)
            #expect(try Data(contentsOf: backend.downloads.appendingPathComponent("\(size)")) == Data(FixtureServer.expectedBytes(count: size)))
            #expect(held.gid == done.gid)
        }
    }

    /// With its WebSocket refused (as behind a proxy that drops the upgrade), the page works
    /// over HTTP POST, polling: a download added, one cancelled, one completed.
    @Test(.timeLimit(.minutes(3)))
    func worksOverHTTPWhenTheWebSocketIsRefused() async throws {
        try await withRefusingPort { refusing in
            let redirect = """
                window.WebSocket = class extends WebSocket {
                  constructor() { super("ws://127.0.0.1:\(refusing)/jsonrpc"); }
                };
                """
            try await withPage("the HTTP scenario", beforeLoad: { try await $0.runBeforeEachPage(redirect) }) { browser, backend, server, _ in
                try await signIn(browser, backend, over: "http")
                try await add(server.url("/bytes/1048576?holdAt=262144&gate=http-a"), browser)
                let held = try await waitForPage(browser, "1048576 running") { state in
                    state.item("1048576").flatMap { $0.section == "active" && ($0.progress ?? 0) > 0 ? $0 : nil }
                }
                try await click("remove", on: held.gid, browser)
                _ = try await waitForPage(browser, "1048576 cancelled") { $0.item("1048576")?.section == "removed" ? true : nil }
                try await add(server.url("/bytes/2000"), browser)
                _ = try await waitForPage(browser, "2000 done") { $0.item("2000")?.section == "done" ? true : nil }
                let state = try await waitForPage(browser, "the page") { $0 }
                #expect(state.connection == "http")
            }
        }
    }

    func scenario(_ browser: WebDriverSession, _ backend: WebPageBackend, _ server: FixtureServer, _ folder: URL) async throws {
        // A slow download, held by the fixture part way: it runs, with its progress.
        let size = 3 * 1024 * 1024
        try await add(server.url("/bytes/\(size)?holdAt=\(1024 * 1024)&gate=web-a"), browser)
        let first = try await waitForPage(browser, "\(size) running with its progress") { state in
            state.item("\(size)").flatMap { $0.section == "active" && ($0.progress ?? 0) > 0 && $0.figures.contains("of 3.0 MiB") ? $0 : nil }
        }
        #expect(first.actions == ["pause", "remove"])

        // A failure (in the second of the two slots) shows the server's own reason.
        try await add(server.url("/status/404"), browser)
        let failed = try await waitForPage(browser, "404 failed with its reason") { state in
            state.item("404").flatMap { $0.section == "failed" && !$0.reason.isEmpty ? $0 : nil }
        }
        let status = try await backend.call("tellStatus", [failed.gid, ["errorMessage"]]) as? [String: Any]
        let message = try #require(status?["errorMessage"] as? String)
        #expect(!message.isEmpty && failed.reason.hasPrefix(message), "page: \(failed.reason); server: \(message)")

        // Another slow one takes the second slot.
        try await add(server.url("/bytes/2097152?holdAt=524288&gate=web-b"), browser)
        let second = try await waitForPage(browser, "2097152 running") { state in
            state.item("2097152").flatMap { $0.section == "active" && ($0.progress ?? 0) > 0 ? $0 : nil }
        }

        // Three small ones wait behind the two running; the last goes first by its priority.
        try await add(server.url("/bytes/1001"), browser)
        try await add(server.url("/bytes/1002"), browser)
        try await add(server.url("/bytes/1003"), position: 0, browser)
        _ = try await waitForPage(browser, "1003, 1001, 1002 waiting in that order") {
            $0.names(in: "waiting") == ["1003", "1001", "1002"] ? true : nil
        }
        // Moved to the front from the page: 1002, 1003, 1001.
        let waiting = try await waitForPage(browser, "1002 waiting") { $0.item("1002") }
        try await click("first", on: waiting.gid, browser)
        _ = try await waitForPage(browser, "1002, 1003, 1001 waiting in that order") {
            $0.names(in: "waiting") == ["1002", "1003", "1001"] ? true : nil
        }
        // 1003 paused, then resumed (back in the queue where it was).
        let third = try await waitForPage(browser, "1003 waiting") { $0.item("1003") }
        try await click("pause", on: third.gid, browser)
        _ = try await waitForPage(browser, "1003 paused") { $0.item("1003")?.section == "paused" ? true : nil }
        try await browser.screenshot().write(to: screenshotFile(folder))
        try await click("unpause", on: third.gid, browser)
        _ = try await waitForPage(browser, "1003 waiting again") { $0.names(in: "waiting") == ["1002", "1003", "1001"] ? true : nil }
        // One up, one down: 1001, 1002, 1003.
        let last = try await waitForPage(browser, "1001 waiting") { $0.item("1001") }
        try await click("up", on: last.gid, browser)
        _ = try await waitForPage(browser, "1002, 1001, 1003 waiting in that order") {
            $0.names(in: "waiting") == ["1002", "1001", "1003"] ? true : nil
        }
        try await click("down", on: waiting.gid, browser)
        _ = try await waitForPage(browser, "1001, 1002, 1003 waiting in that order") {
            $0.names(in: "waiting") == ["1001", "1002", "1003"] ? true : nil
        }

        // Cancelling the second running download frees its slot: the queue runs in its order.
        try await click("remove", on: second.gid, browser)
        let done = try await waitForPage(browser, "2097152 cancelled and the three small ones done") { state in
            state.item("2097152")?.section == "removed" && state.names(in: "done").count == 3 ? state.names(in: "done") : nil
        }
        // Done shows the latest first: they ran in the queue's order.
        #expect(done == ["1003", "1002", "1001"])

        // The first download goes on to the end once the fixture lets it.
        server.openGate("web-a")
        let complete = try await waitForPage(browser, "\(size) done") { state in
            state.item("\(size)").flatMap { $0.section == "done" ? $0 : nil }
        }
        #expect(complete.progress == 100)
        #expect(complete.figures == "3.0 MiB")
        let file = try Data(contentsOf: backend.downloads.appendingPathComponent("\(size)"))
        #expect(file == Data(FixtureServer.expectedBytes(count: size)))

        // A failure cleared from the list.
        try await click("clear", on: failed.gid, browser)
        _ = try await waitForPage(browser, "404 cleared") { $0.item("404") == nil && $0.item("\(size)") != nil ? true : nil }

        // A link to the page that names another server gets none of this one's secret.
        var other = try #require(URLComponents(url: backend.pageURL, resolvingAgainstBaseURL: false))
        other.queryItems = [URLQueryItem(name: "rpc", value: server.url("/echo").absoluteString)]
        try await browser.open(try #require(other.url))
        try await server.waitForRequests(pathPrefix: "/echo", count: 1)
        #expect(try await browser.evaluate("return document.getElementById('secret').value") == "")
    }

    /// Where the screenshot goes: CURLQUEUE_WEB_SCREENSHOT (docs/images/web-page.png is made
    /// so), else the test's folder.
    func screenshotFile(_ folder: URL) -> URL {
        if let path = ProcessInfo.processInfo.environment["CURLQUEUE_WEB_SCREENSHOT"] {
            return URL(fileURLWithPath: path)
        }
        return folder.appendingPathComponent("web-page.png")
    }
}
