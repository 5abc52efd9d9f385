// With CQ_BENCH_TRACING=1 in the environment: a tracer that makes real spans and exports none
// is bootstrapped before any queue is made, so that scripts/callgrind-per-get measures what
// CurlQueue's spans cost with a tracer (docs/performance.md). Each span keeps its name,
// attributes and status under a mutex, as a real tracer's does, and is dropped at its end;
// `inject` writes a W3C `traceparent`, as an OpenTelemetry tracer's does.
import Foundation
import Synchronization
import Tracing

func bootstrapBenchTracingIfAsked() {
    guard ProcessInfo.processInfo.environment["CQ_BENCH_TRACING"] == "1" else { return }
    InstrumentationSystem.bootstrap(BenchTracer())
}

struct BenchSpanIDs: Sendable {
    var traceHigh: UInt64
    var traceLow: UInt64
    var span: UInt64
}

private enum BenchSpanKey: ServiceContextKey {
    typealias Value = BenchSpanIDs
}

final class BenchTracer: Tracer {
    private let nextID = Atomic<UInt64>(1)

    func startSpan<Instant: TracerInstant>(
        _ operationName: String, context: @autoclosure () -> ServiceContext, ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant, function: String, file fileID: String, line: UInt
    ) -> BenchSpan {
        var context = context()
        let id = nextID.add(1, ordering: .relaxed).newValue
        let parent = context[BenchSpanKey.self]
        context[BenchSpanKey.self] = BenchSpanIDs(traceHigh: parent?.traceHigh ?? id, traceLow: parent?.traceLow ?? id, span: id)
        return BenchSpan(name: operationName, context: context)
    }

    func forceFlush() {}

    func inject<Carrier, Inject: Injector>(_ context: ServiceContext, into carrier: inout Carrier, using injector: Inject)
    where Inject.Carrier == Carrier {
        guard let ids = context[BenchSpanKey.self] else { return }
        injector.inject("00-\(hex(ids.traceHigh))\(hex(ids.traceLow))-\(hex(ids.span))-01", forKey: "traceparent", into: &carrier)
    }

    func extract<Carrier, Extract: Extractor>(_ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract)
    where Extract.Carrier == Carrier {}

    private func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}

final class BenchSpan: Span {
    let context: ServiceContext
    private let state: Mutex<(name: String, attributes: SpanAttributes, status: SpanStatus?, ended: Bool)>

    init(name: String, context: ServiceContext) {
        self.context = context
        state = Mutex((name, SpanAttributes(), nil, false))
    }

    var operationName: String {
        get { state.withLock { $0.name } }
        set { state.withLock { $0.name = newValue } }
    }

    var attributes: SpanAttributes {
        get { state.withLock { $0.attributes } }
        set { state.withLock { $0.attributes = newValue } }
    }

    var isRecording: Bool { state.withLock { !$0.ended } }
    func setStatus(_ status: SpanStatus) { state.withLock { $0.status = status } }
    func addEvent(_ event: SpanEvent) {}
    func recordError<Instant: TracerInstant>(_ error: any Error, attributes: SpanAttributes, at instant: @autoclosure () -> Instant) {}
    func addLink(_ link: SpanLink) {}
    func end<Instant: TracerInstant>(at instant: @autoclosure () -> Instant) { state.withLock { $0.ended = true } }
}
