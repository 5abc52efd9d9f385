import Dispatch
import Foundation
import HTTPTypes
import Tracing

/// The spans of one traced operation: its own (kind client, from joining the queue to its
/// outcome) and one child per attempt (kind client, the request on the wire, whose context the
/// tracer injects into the request's header fields: W3C `traceparent` with an OpenTelemetry
/// tracer). Attributes follow OpenTelemetry's HTTP client conventions (docs/observability.md).
///
/// A tracer is user code, so its calls are never made on the engine thread nor under a lock:
/// spans start on the thread that added the operation, or on ``queue`` when the engine thread
/// or a retry timer starts an attempt; they end on the operation's callback queue, where its
/// handlers are delivered, at the instant the outcome was decided.
final class OperationTrace: Sendable {
    /// Where attempt spans start when the thread that starts the attempt must not run user code.
    static let queue = DispatchQueue(label: "CurlQueue.tracing")

    let tracer: any Tracer
    let span: any Span
    /// The operation's queue's metrics instruments, kept here so that an operation's state
    /// holds both in one word (`RequestOperation.Observers`).
    let metrics: QueueMetrics.Instruments?
    /// `http.request.method`, `url.full` (redacted), `server.address`, `server.port`.
    private let requestAttributes: SpanAttributes
    private let name: String
    /// The running attempt's span and number; only taken and set here, no tracer call under it.
    private let attempt: Locked<(span: (any Span)?, number: Int)>

    init(tracer: any Tracer, request: Request, parent: ServiceContext, metrics: QueueMetrics.Instruments?) {
        self.tracer = tracer
        self.metrics = metrics
        name = request.method.rawValue
        requestAttributes = Self.attributes(of: request)
        span = tracer.startSpan(name, context: parent, ofKind: .client)
        span.attributes = requestAttributes
        attempt = Locked((nil, 0))
    }

    /// Starts the span of `attempt` and injects its context into the attempt's header fields.
    /// Before the engine has the attempt; never on the engine thread nor under a lock.
    func startAttempt(_ attempt: Attempt) {
        let span = tracer.startSpan(name, context: self.span.context, ofKind: .client)
        var attributes = requestAttributes
        if attempt.number > 1 { attributes["http.request.resend_count"] = attempt.number - 1 }
        span.attributes = attributes
        var fields = attempt.request.headerFields
        tracer.inject(span.context, into: &fields, using: HTTPFieldsInjector())
        attempt.request.headerFields = fields
        self.attempt.withLock { $0 = (span, attempt.number) }
    }

    /// Takes the span of the attempt that just ended (no tracer call: any thread).
    func takeAttemptSpan() -> (any Span)? {
        attempt.withLock { state in
            defer { state.span = nil }
            return state.span
        }
    }

    /// Ends the span of an attempt that failed with `cause` and is retried. On the callback queue.
    static func endRetried(_ span: any Span, cause: RetriedAttempt.Cause, at instant: DefaultTracerClock.Instant) {
        switch cause {
        case .status(let code): mark(span, status: code)
        case .error(let error): mark(span, error: error)
        }
        span.end(at: instant)
    }

    /// Ends the last attempt's span, `attemptSpan`, and the operation's with the outcome. On
    /// the callback queue.
    func end(_ result: Result<Response, RequestError>, attemptSpan: (any Span)?, at instant: DefaultTracerClock.Instant) {
        let attempts = attempt.withLock { $0.number }
        for span in [attemptSpan, span].compactMap({ $0 }) {
            switch result {
            case .success(let response): Self.mark(span, status: response.status.code)
            case .failure(let error): Self.mark(span, error: error)
            }
        }
        if attempts > 1 { span.attributes["http.request.resend_count"] = attempts - 1 }
        attemptSpan?.end(at: instant)
        span.end(at: instant)
    }

    /// A response: its status; one of 400 and up is an error of that `error.type`, as
    /// OpenTelemetry's client spans have it.
    private static func mark(_ span: any Span, status: Int) {
        span.attributes["http.response.status_code"] = status
        if status >= 400 {
            span.attributes["error.type"] = String(status)
            span.setStatus(SpanStatus(code: .error))
        }
    }

    /// A failure, cancellation included: `error.type` as the metrics' label has it (a libcurl
    /// code name, `cancelled`, …), never the message.
    private static func mark(_ span: any Span, error: RequestError) {
        span.attributes["error.type"] = QueueMetrics.Instruments.errorType(error)
        span.setStatus(SpanStatus(code: .error))
    }

    /// `http.request.method`, `url.full` through ``SecretRedactor/standard`` (userinfo and
    /// secret query values hidden), `server.address` and `server.port` (the scheme's default
    /// when the URL names none).
    private static func attributes(of request: Request) -> SpanAttributes {
        let url = request.url
        var attributes = SpanAttributes()
        attributes["http.request.method"] = request.method.rawValue
        attributes["url.full"] = SecretRedactor.standard.redact(url)
        if let host = url.host { attributes["server.address"] = host }
        if let port = url.port ?? (url.scheme?.lowercased() == "https" ? 443 : url.scheme?.lowercased() == "http" ? 80 : nil) {
            attributes["server.port"] = port
        }
        return attributes
    }
}

/// Puts a tracer's context into a request's header fields, replacing a field of the same name.
struct HTTPFieldsInjector: Injector {
    func inject(_ value: String, forKey key: String, into fields: inout HTTPFields) {
        guard let name = HTTPField.Name(key) else { return }
        fields[name] = value
    }
}
