public import CurlQueue
public import Foundation
public import HTTPTypes

/// The completion-closure calls. Each returns a ``RequestHandle`` and guarantees:
/// - `onStart`, if given, runs first, once; then exactly one of `onSuccess` and `onError`
///   runs, once — for every call, cancelled ones included.
/// - Every closure runs on the configuration's ``HTTPClient/Configuration/callbackQueue``
///   (serial by default), never on the engine thread, never under a lock: a closure may
///   start, cancel or retry calls.
/// - The running call releases its closures once the outcome has been delivered; the returned
///   handle keeps them for ``RequestHandle/retry()`` while it lives. An object that stores the
///   handle should be captured weakly by the closures.
///
/// As with the `async` calls, the ``Response`` calls succeed with any status and the `as:`
/// calls fail with ``HTTPClientError/status(_:)`` unless it is 2xx.
extension HTTPClient {
    /// Sends a request object.
    @discardableResult
    public func send<R: APIRequest>(
        _ request: R, lifetime: RequestHandle.Lifetime = .managed,
        onStart: (@Sendable () -> Void)? = nil,
        onSuccess: @escaping @Sendable (R.Output) -> Void,
        onError: @escaping @Sendable (HTTPClientError) -> Void
    ) -> RequestHandle {
        var startCallback: (@Sendable (RequestHandle.ID) -> Void)?
        if let onStart { startCallback = { _ in onStart() } }
        let callbacks = Callbacks<R.Output>(onStart: startCallback) { _, result in
            switch result {
            case .success(let output): onSuccess(output)
            case .failure(let error): onError(error)
            }
        }
        return start(request, lifetime: lifetime, callbacks: callbacks)
    }

    /// Sends a request with any method; succeeds with the response, whatever its status.
    @discardableResult
    public func request(
        _ method: HTTPRequest.Method, _ path: String, query: [URLQueryItem] = [], headerFields: HTTPFields = [:],
        body: Body? = nil, lifetime: RequestHandle.Lifetime = .managed,
        onStart: (@Sendable () -> Void)? = nil,
        onSuccess: @escaping @Sendable (Response) -> Void,
        onError: @escaping @Sendable (HTTPClientError) -> Void
    ) -> RequestHandle {
        send(AdHocRequest(method, path, query: query, headerFields: headerFields, body: body),
             lifetime: lifetime, onStart: onStart, onSuccess: onSuccess, onError: onError)
    }

    /// Sends a request with any method; succeeds with a 2xx response's JSON body decoded as `type`.
    @discardableResult
    public func request<T: Decodable & Sendable>(
        _ method: HTTPRequest.Method, _ path: String, query: [URLQueryItem] = [], headerFields: HTTPFields = [:],
        body: Body? = nil, as type: T.Type, lifetime: RequestHandle.Lifetime = .managed,
        onStart: (@Sendable () -> Void)? = nil,
        onSuccess: @escaping @Sendable (T) -> Void,
        onError: @escaping @Sendable (HTTPClientError) -> Void
    ) -> RequestHandle {
        send(AdHocRequest(method, path, query: query, headerFields: headerFields, body: body, as: type),
             lifetime: lifetime, onStart: onStart, onSuccess: onSuccess, onError: onError)
    }

    // MARK: Internals

    /// What a call started with callbacks does at its start and at its end.
    struct Callbacks<Output: Sendable>: Sendable {
        var onStart: (@Sendable (RequestHandle.ID) -> Void)?
        var onOutcome: @Sendable (RequestHandle.ID, Result<Output, HTTPClientError>) -> Void
        /// Whether a cancel that comes before the outcome turns it into `.transport(.cancelled)`;
        /// false for a batch, whose outcome holds each call's own result.
        var cancellationReplacesOutcome = true
    }

    /// Starts a call in a task of its own and delivers its outcome, once, on the callback queue.
    func start<R: APIRequest>(_ request: R, lifetime: RequestHandle.Lifetime, callbacks: Callbacks<R.Output>) -> RequestHandle {
        start(lifetime: lifetime, callbacks: callbacks) { [self] () async throws(HTTPClientError) -> R.Output in
            try await execute(request)
        }
    }

    /// Runs `work` in a task of its own and delivers its outcome, once, on the callback
    /// queue. ``RequestHandle/retry()`` runs `work` again under a new handle.
    func start<Output: Sendable>(
        lifetime: RequestHandle.Lifetime, callbacks: Callbacks<Output>,
        work: @escaping @Sendable () async throws(HTTPClientError) -> Output
    ) -> RequestHandle {
        let id = CallState.nextID()
        let call = CallState()
        let queue = configuration.callbackQueue
        if let onStart = callbacks.onStart {
            queue.async { onStart(id) }  // queued before the task can queue the outcome
        }
        let task = Task {
            let result: Result<Output, HTTPClientError>
            do throws(HTTPClientError) {
                result = .success(try await work())
            } catch {
                result = .failure(error)
            }
            let outcome = call.finish(result, replacingOnCancel: callbacks.cancellationReplacesOutcome)
            queue.async { callbacks.onOutcome(id, outcome) }
        }
        call.attach(task)
        return RequestHandle(id: id, lifetime: lifetime, call: call) { [self] lifetime in
            start(lifetime: lifetime, callbacks: callbacks, work: work)
        }
    }
}
