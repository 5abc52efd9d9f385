import CurlQueue
import CurlQueueClient
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Dispatch
import Foundation
import HTTPTypes

/// A client for the fixture server on a queue of its own (duplicates allowed, so identical
/// calls of one test never cancel each other).
func makeClient(
    _ server: FixtureServer, middleware: [any HTTPClientMiddleware] = [],
    configure: (inout HTTPClient.Configuration) -> Void = { _ in }
) -> HTTPClient {
    let queue = RequestQueue(maxConcurrentRequestCount: 8)
    queue.allowDuplicateRequests = true
    var configuration = HTTPClient.Configuration(baseURL: URL(string: server.baseURL)!, queue: queue, middleware: middleware)
    configure(&configuration)
    return HTTPClient(configuration: configuration)
}

/// The `/echo` document.
struct Echo: Decodable, Sendable {
    var method: String
    var uri: String
    var headers: [[String]]
    var bodyLength: Int
    var body: String

    /// The values of the header `name`, compared without case.
    func values(_ name: String) -> [String] {
        headers.filter { $0.first?.lowercased() == name.lowercased() }.compactMap { $0.last }
    }

    var bodyText: String { String(decoding: Data(base64Encoded: body) ?? Data(), as: UTF8.self) }
    var bodyData: Data { Data(base64Encoded: body) ?? Data() }
}

/// The `/json?body=…` path for a JSON document.
func jsonPath(_ document: String) -> (path: String, query: [URLQueryItem]) {
    ("json", [URLQueryItem(name: "body", value: document)])
}

/// The outcome of a closure-style call, collected in order with the thread facts of each
/// callback.
final class CallRecorder<Output: Sendable>: @unchecked Sendable {  // safe: every member is guarded by `lock`
    private let lock = NSLock()
    private var events: [String] = []
    private var outcomes: [Result<Output, HTTPClientError>] = []
    private var waiters: [(count: Int, continuation: CheckedContinuation<[Result<Output, HTTPClientError>], Never>)] = []

    var onStart: @Sendable () -> Void { { self.lock.withLock { self.events.append("start") } } }
    var onSuccess: @Sendable (Output) -> Void { { self.record(.success($0)) } }
    var onError: @Sendable (HTTPClientError) -> Void { { self.record(.failure($0)) } }

    private func record(_ result: Result<Output, HTTPClientError>) {
        let (ready, snapshot) = lock.withLock { () -> ([CheckedContinuation<[Result<Output, HTTPClientError>], Never>], [Result<Output, HTTPClientError>]) in
            self.events.append(result.isSuccess ? "success" : "error")
            self.outcomes.append(result)
            let total = self.outcomes.count
            let ready = self.waiters.filter { $0.count <= total }.map(\.continuation)
            self.waiters.removeAll { $0.count <= total }
            return (ready, self.outcomes)
        }
        for waiter in ready { waiter.resume(returning: snapshot) }
    }

    /// The first `count` outcomes, once there are that many.
    func outcomes(_ count: Int) async -> [Result<Output, HTTPClientError>] {
        await withCheckedContinuation { continuation in
            let done = lock.withLock { () -> [Result<Output, HTTPClientError>]? in
                if outcomes.count >= count { return outcomes }
                waiters.append((count, continuation))
                return nil
            }
            if let done { continuation.resume(returning: done) }
        }
    }

    /// The first outcome, once there is one.
    func outcome() async -> Result<Output, HTTPClientError> {
        await outcomes(1)[0]
    }

    var recordedEvents: [String] { lock.withLock { events } }
    var outcomeCount: Int { lock.withLock { outcomes.count } }
}

extension Result {
    var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }

    var value: Success? {
        if case .success(let value) = self { return value }
        return nil
    }
}

/// Waits until every callback already queued on the client's callback queue has run.
func drainClientCallbacks(_ queue: DispatchQueue = HTTPClient.defaultCallbackQueue) async {
    await withCheckedContinuation { continuation in queue.async { continuation.resume() } }
}

/// The outcome of an async call as a `Result`.
func result<T>(_ body: () async throws(HTTPClientError) -> T) async -> Result<T, HTTPClientError> {
    do throws(HTTPClientError) {
        return .success(try await body())
    } catch {
        return .failure(error)
    }
}
