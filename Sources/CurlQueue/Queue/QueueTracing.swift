import Foundation
import Tracing

/// The tracer a queue's operations report their spans to (docs/observability.md#tracing).
///
/// Decided once, when the queue is made: a queue whose tracer is swift-distributed-tracing's
/// no-op one (nothing bootstrapped, none given) has no `QueueTracing`, and its operations then
/// do no span work at all, only a nil check at each of their steps.
final class QueueTracing: Sendable {
    let tracer: any Tracer

    /// Nil when `tracer`, or when none is given the bootstrapped `InstrumentationSystem.tracer`,
    /// is the no-op tracer.
    static func make(_ tracer: (any Tracer)?) -> QueueTracing? {
        let tracer = tracer ?? InstrumentationSystem.tracer
        if tracer is NoOpTracer { return nil }
        return QueueTracing(tracer: tracer)
    }

    private init(tracer: any Tracer) {
        self.tracer = tracer
    }

    /// Starts the span of an operation that joins the queue, as a child of the caller's task's
    /// `ServiceContext`; the trace carries the queue's `metrics` for the operation too. On the
    /// caller's thread, never under a lock: a tracer is user code.
    func startOperation(_ request: Request, metrics: QueueMetrics.Instruments?) -> OperationTrace {
        OperationTrace(tracer: tracer, request: request, parent: ServiceContext.current ?? .topLevel, metrics: metrics)
    }
}
