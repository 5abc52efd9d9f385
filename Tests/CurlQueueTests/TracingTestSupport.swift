import InMemoryTracing
import Tracing

/// swift-distributed-tracing's in-memory tracer with W3C-shaped ids (32 and 16 hex digits),
/// whose `inject` writes a W3C `traceparent`, as an OpenTelemetry tracer's does: the tests of
/// what the server sees. Spans are recorded by ``recorder``.
struct W3CTestTracer: Tracer {
    let recorder = InMemoryTracer(
        idGenerator: .init(nextTraceID: { hex(UInt64.random(in: 1...UInt64.max)) + hex(UInt64.random(in: 1...UInt64.max)) },
                           nextSpanID: { hex(UInt64.random(in: 1...UInt64.max)) }))

    func startSpan<Instant: TracerInstant>(
        _ operationName: String, context: @autoclosure () -> ServiceContext, ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant, function: String, file fileID: String, line: UInt
    ) -> InMemorySpan {
        recorder.startSpan(operationName, context: context(), ofKind: kind, at: instant(), function: function, file: fileID, line: line)
    }

    func forceFlush() { recorder.forceFlush() }

    func inject<Carrier, Inject: Injector>(_ context: ServiceContext, into carrier: inout Carrier, using injector: Inject)
    where Inject.Carrier == Carrier {
        guard let span = context.inMemorySpanContext else { return }
        injector.inject("00-\(span.traceID)-\(span.spanID)-01", forKey: "traceparent", into: &carrier)
    }

    func extract<Carrier, Extract: Extractor>(_ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract)
    where Extract.Carrier == Carrier {}
}

/// 16 lower-case hex digits.
private func hex(_ value: UInt64) -> String {
    let digits = String(value, radix: 16)
    return String(repeating: "0", count: 16 - digits.count) + digits
}

extension InMemoryTracer {
    /// The finished spans of the operations (no parent in the tracer), in the order they ended.
    var operationSpans: [FinishedInMemorySpan] { finishedSpans.filter { $0.parentSpanID == nil } }

    /// The finished attempt spans of `operation`, by their resend count.
    func attemptSpans(of operation: FinishedInMemorySpan) -> [FinishedInMemorySpan] {
        finishedSpans.filter { $0.parentSpanID == operation.spanID }.sorted { $0.resendCount < $1.resendCount }
    }
}

extension FinishedInMemorySpan {
    /// `http.request.resend_count`, 0 when absent.
    var resendCount: Int64 {
        if case .int64(let count) = attributes.get("http.request.resend_count") { return count }
        return 0
    }
}
