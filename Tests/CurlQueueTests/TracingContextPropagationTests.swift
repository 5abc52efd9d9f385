@testable import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import InMemoryTracing
import Testing
import Tracing

/// With a tracer, each attempt's request carries the tracer's context (W3C `traceparent` from
/// an OpenTelemetry-like tracer) naming the attempt's span, under the caller's trace; with the
/// no-op tracer (nothing bootstrapped, none given) the request carries none.
@Suite struct TracingContextPropagationTests {
    @Test func theServerSeesTheAttemptSpanInTraceparent() async throws {
        try await withServer { server in
            let tracer = W3CTestTracer()
            let queue = RequestQueue(tracer: tracer)
            let path = "/bytes/10?propagation=\(UUID())"
            // The caller's span: the operation's span is its child.
            let parent = tracer.startSpan("caller")
            try await ServiceContext.withValue(parent.context) {
                _ = try await queue.response(for: Request(url: server.url(path)))
            }
            parent.end()
            await drain()
            let received = server.requests.filter { $0.uri == path }
            try #require(received.count == 1)
            let traceparent = try #require(received[0].header("traceparent"))
            let parts = traceparent.split(separator: "-").map(String.init)
            try #require(parts.count == 4, "\(traceparent)")
            #expect(parts[0] == "00")
            #expect(parts[1].count == 32 && parts[1].allSatisfy(\.isHexDigit) && parts[1] != String(repeating: "0", count: 32))
            #expect(parts[2].count == 16 && parts[2].allSatisfy(\.isHexDigit))
            #expect(parts[3] == "01")

            let spans = tracer.recorder.finishedSpans
            let caller = try #require(spans.first { $0.operationName == "caller" })
            let operation = try #require(spans.first { $0.parentSpanID == caller.spanID })
            let attempt = try #require(spans.first { $0.parentSpanID == operation.spanID })
            #expect(parts[1] == attempt.traceID)
            #expect(parts[1] == caller.traceID)
            #expect(parts[2] == attempt.spanID)
        }
    }

    @Test func noTraceparentWithTheNoOpTracer() async throws {
        try await withServer { server in
            // Nothing is bootstrapped in the tests: the default is the no-op tracer.
            #expect(InstrumentationSystem.tracer is NoOpTracer)
            let path = "/bytes/10?propagation=\(UUID())"
            let (unset, noOp) = (RequestQueue(), RequestQueue(tracer: NoOpTracer()))
            // Decided once, when the queue is made: no tracer kept, so no span work per request.
            #expect(unset.tracing == nil && noOp.tracing == nil)
            #expect(RequestQueue(tracer: InMemoryTracer()).tracing != nil)
            _ = try await unset.response(for: Request(url: server.url(path)))
            _ = try await noOp.response(for: Request(url: server.url(path)))
            let received = server.requests.filter { $0.uri == path }
            try #require(received.count == 2)
            for request in received {
                #expect(request.header("traceparent") == nil)
                #expect(!request.headers.contains { $0.name.lowercased().contains("trace") })
            }
        }
    }
}
