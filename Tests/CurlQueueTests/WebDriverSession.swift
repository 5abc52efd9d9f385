import CurlQueue
import Foundation
import HTTPTypes
#if canImport(Glibc)
import Glibc
#endif

/// Headless Chromium driven through chromedriver's W3C WebDriver HTTP API (plain JSON over
/// HTTP on 127.0.0.1, sent with CurlQueue itself). One browser per session; ``close()`` ends
/// the browser and chromedriver, and kills any Chromium process left with this session's
/// profile folder (a browser that a failed test could not close).
final class WebDriverSession: @unchecked Sendable {  // safe: every stored property is a constant
    static let chromium = "/usr/bin/chromium"
    static let chromedriver = "/usr/bin/chromedriver"
    /// Whether the Debian packages `chromium` and `chromium-driver` are installed.
    static var installed: Bool {
        FileManager.default.isExecutableFile(atPath: chromium)
            && FileManager.default.isExecutableFile(atPath: chromedriver)
    }

    private let driver: WatchedProcess
    private let base: String
    private let id: String
    private let profile: URL

    /// W3C's key of an element reference in a JSON answer.
    private static let elementKey = "element-6066-11e4-a52e-4f735466cecf"

    private init(driver: WatchedProcess, base: String, id: String, profile: URL) {
        self.driver = driver
        self.base = base
        self.id = id
        self.profile = profile
    }

    /// Starts chromedriver on a free port, and Chromium through it with its profile in
    /// `folder`, its window `width`×`height` CSS pixels.
    static func start(in folder: URL, width: Int = 1000, height: Int = 1500) async throws -> WebDriverSession {
        let driver = try WatchedProcess(chromedriver, ["--port=0"])
        let port = try await driver.waitForLine { line -> Int? in
            guard let range = line.range(of: "was started successfully on port ") else { return nil }
            return Int(line[range.upperBound...].prefix { $0.isNumber })
        }
        let base = "http://127.0.0.1:\(port)"
        let profile = folder.appendingPathComponent("chromium-profile-\(UUID().uuidString)")
        let capabilities: [String: Any] = ["capabilities": ["alwaysMatch": [
            "browserName": "chrome",
            "goog:chromeOptions": [
                "binary": chromium,
                // --no-sandbox: tests run as root in CI, where Chromium's sandbox refuses to start.
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--no-first-run", "--disable-extensions", "--hide-scrollbars",
                         "--window-size=\(width),\(height)", "--user-data-dir=\(profile.path)"],
            ] as [String: Any],
        ] as [String: Any]]]
        do {
            let answer = try await send(.post, "\(base)/session", capabilities) as? [String: Any]
            guard let id = answer?["sessionId"] as? String else {
                throw WebDriverError.unexpected("no session: \(String(describing: answer))")
            }
            return WebDriverSession(driver: driver, base: base, id: id, profile: profile)
        } catch {
            driver.stop()
            killBrowsers(using: profile)
            throw error
        }
    }

    /// Ends the browser (a WebDriver `DELETE /session`), then chromedriver, then whatever
    /// Chromium process still runs with this session's profile.
    func close() async {
        _ = try? await Self.send(.delete, "\(base)/session/\(id)", nil, timeout: .seconds(20))
        driver.stop()
        Self.killBrowsers(using: profile)
    }

    func open(_ url: URL) async throws {
        _ = try await command(.post, "url", ["url": url.absoluteString])
    }

    /// The first element matching the CSS `selector` (WebDriver's "no such element" if none).
    func element(_ selector: String) async throws -> String {
        let answer = try await command(.post, "element", ["using": "css selector", "value": selector])
        guard let element = (answer as? [String: Any])?[Self.elementKey] as? String else {
            throw WebDriverError.unexpected("no element reference for \(selector): \(String(describing: answer))")
        }
        return element
    }

    /// Clicks the element as a person would (WebDriver scrolls it into view, and fails when
    /// something else would get the click).
    func click(_ selector: String) async throws {
        let element = try await element(selector)
        _ = try await command(.post, "element/\(element)/click", [:])
    }

    /// Types `text` into the element.
    func type(_ text: String, into selector: String) async throws {
        let element = try await element(selector)
        _ = try await command(.post, "element/\(element)/value", ["text": text])
    }

    /// Runs `script` in every page opened from now on, before the page's own scripts
    /// (chromedriver's Chrome DevTools command Page.addScriptToEvaluateOnNewDocument).
    func runBeforeEachPage(_ script: String) async throws {
        _ = try await Self.send(.post, "\(base)/session/\(id)/goog/cdp/execute",
                                ["cmd": "Page.addScriptToEvaluateOnNewDocument", "params": ["source": script]])
    }

    /// Empties a form field.
    func clear(_ selector: String) async throws {
        let element = try await element(selector)
        _ = try await command(.post, "element/\(element)/clear", [:])
    }

    /// Runs `script` (a function body) in the page and returns what it returns, as a string.
    func evaluate(_ script: String) async throws -> String {
        let answer = try await command(.post, "execute/sync", ["script": script, "args": [Any]()])
        guard let text = answer as? String else {
            throw WebDriverError.unexpected("the script returned no string: \(String(describing: answer))")
        }
        return text
    }

    /// A PNG of the window.
    func screenshot() async throws -> Data {
        guard let base64 = try await command(.get, "screenshot", nil) as? String,
              let data = Data(base64Encoded: base64) else {
            throw WebDriverError.unexpected("no screenshot")
        }
        return data
    }

    private func command(_ method: HTTPRequest.Method, _ path: String, _ body: [String: Any]?) async throws -> Any? {
        try await Self.send(method, "\(base)/session/\(id)/\(path)", body)
    }

    /// Sends one WebDriver command and returns its `value`, or throws WebDriver's error.
    private static func send(
        _ method: HTTPRequest.Method, _ url: String, _ body: [String: Any]?, timeout: Duration = .seconds(90)
    ) async throws -> Any? {
        guard let target = URL(string: url) else { throw WebDriverError.unexpected("bad URL \(url)") }
        var request = Request(url: target, method: method)
        if let body {
            request.body = .bytes(try JSONSerialization.data(withJSONObject: body))
            request.headerFields[.contentType] = "application/json"
        }
        request.timeouts.total = timeout
        let response = try await RequestOperation(request: request).response()
        let object = try? JSONSerialization.jsonObject(with: response.body)
        let value = (object as? [String: Any])?["value"]
        if response.status.code != 200 {
            let error = value as? [String: Any]
            throw WebDriverError.command("\(method) \(url)", response.status.code,
                                         error?["error"] as? String ?? "", error?["message"] as? String ?? "")
        }
        return value ?? nil
    }

    /// Kills every process whose command line names `profile`: the Chromium processes of one
    /// session (each test's profile folder is its own, so no other browser matches).
    private static func killBrowsers(using profile: URL) {
        let pids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for pid in pids.compactMap({ pid_t($0) }) {
            guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { continue }
            if String(decoding: data, as: UTF8.self).contains(profile.path) {
                kill(pid, SIGKILL)
            }
        }
    }
}

enum WebDriverError: Error, CustomStringConvertible {
    case command(String, Int, String, String)
    case unexpected(String)

    var description: String {
        switch self {
        case .command(let what, let status, let error, let message):
            return "WebDriver \(what): \(status) \(error): \(message)"
        case .unexpected(let what):
            return "WebDriver: \(what)"
        }
    }
}
