import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import InMemoryTracing
import Testing
import Tracing

/// A queue given a tracer makes a client span per operation and a child client span per
/// attempt, with OpenTelemetry's HTTP client attributes for each outcome (docs/observability.md).
@Suite struct TracingSpanOutcomeTests {
    private func string(_ span: FinishedInMemorySpan, _ key: String) -> String? {
        if case .string(let value) = span.attributes.get(key) { return value }
        return nil
    }

    private func int(_ span: FinishedInMemorySpan, _ key: String) -> Int64? {
        if case .int64(let value) = span.attributes.get(key) { return value }
        return nil
    }

    /// The one operation's span and its attempts' spans, once they ended (on the default
    /// callback queue, before `drain` returns).
    private func spans(_ tracer: InMemoryTracer, attempts: Int) async throws -> (FinishedInMemorySpan, [FinishedInMemorySpan]) {
        await drain()
        let operations = tracer.operationSpans
        try #require(operations.count == 1, "\(tracer.finishedSpans)")
        let attemptSpans = tracer.attemptSpans(of: operations[0])
        try #require(attemptSpans.count == attempts, "\(tracer.finishedSpans)")
        #expect(tracer.activeSpans.isEmpty)
        return (operations[0], attemptSpans)
    }

    private func expectRequestAttributes(_ span: FinishedInMemorySpan, _ url: URL, port: Int) {
        #expect(span.kind == .client)
        #expect(span.operationName == "GET")
        #expect(string(span, "http.request.method") == "GET")
        #expect(string(span, "url.full") == url.absoluteString)
        #expect(string(span, "server.address") == "127.0.0.1")
        #expect(int(span, "server.port") == Int64(port))
    }

    @Test func aResponseEndsBothSpansWithItsStatus() async throws {
        try await withServer { server in
            let tracer = InMemoryTracer()
            let queue = RequestQueue(name: "traced", tracer: tracer)
            let url = server.url("/bytes/100")
            _ = try await queue.response(for: Request(url: url))
            let (operation, attempts) = try await spans(tracer, attempts: 1)
            for span in [operation, attempts[0]] {
                expectRequestAttributes(span, url, port: server.port)
                #expect(int(span, "http.response.status_code") == 200)
                #expect(span.attributes.get("error.type") == nil)
                #expect(span.attributes.get("http.request.resend_count") == nil)
                #expect(span.status == nil)
            }
            #expect(attempts[0].traceID == operation.traceID)
            #expect(attempts[0].startInstant.nanosecondsSinceEpoch >= operation.startInstant.nanosecondsSinceEpoch)
            #expect(attempts[0].endInstant.nanosecondsSinceEpoch <= operation.endInstant.nanosecondsSinceEpoch)
        }
    }

    @Test func aStatusOf400OrMoreIsAnErrorOfThatType() async throws {
        try await withServer { server in
            let tracer = InMemoryTracer()
            let queue = RequestQueue(tracer: tracer)
            let url = server.url("/status/404")
            let response = try await queue.response(for: Request(url: url))
            #expect(response.status.code == 404)
            let (operation, attempts) = try await spans(tracer, attempts: 1)
            for span in [operation, attempts[0]] {
                expectRequestAttributes(span, url, port: server.port)
                #expect(int(span, "http.response.status_code") == 404)
                #expect(string(span, "error.type") == "404")
                #expect(span.status?.code == .error)
            }
        }
    }

    @Test func aRetriedRequestHasASpanPerAttemptWithItsResendCount() async throws {
        try await withServer { server in
            let tracer = InMemoryTracer()
            let queue = RequestQueue(tracer: tracer)
            let url = server.url("/flaky/traced-\(UUID())?failures=1")
            let operation = RequestOperation(request: Request(url: url))
            operation.autoRetry = true
            operation.retryPolicy = RetryPolicy(initialBackoff: .milliseconds(10), retryableStatuses: [503])
            try queue.add(operation)
            await queue.waitUntilAllOperationsAreFinished()
            let (span, attempts) = try await spans(tracer, attempts: 2)
            expectRequestAttributes(span, url, port: server.port)
            #expect(int(span, "http.response.status_code") == 200)
            #expect(int(span, "http.request.resend_count") == 1)
            #expect(span.status == nil)
            // The first attempt: the 503 that was retried, an error of its own.
            #expect(attempts[0].attributes.get("http.request.resend_count") == nil)
            #expect(int(attempts[0], "http.response.status_code") == 503)
            #expect(string(attempts[0], "error.type") == "503")
            #expect(attempts[0].status?.code == .error)
            #expect(int(attempts[1], "http.request.resend_count") == 1)
            #expect(int(attempts[1], "http.response.status_code") == 200)
            #expect(attempts[1].status == nil)
            #expect(attempts[0].endInstant.nanosecondsSinceEpoch <= attempts[1].startInstant.nanosecondsSinceEpoch)
        }
    }

    @Test func aCancelledRequestEndsItsSpansAsCancelled() async throws {
        try await withServer { server in
            let tracer = InMemoryTracer()
            let queue = RequestQueue(tracer: tracer)
            let gate = "traced-\(UUID())"
            let operation = queue.add(Request(url: server.url("/gate/\(gate)")))
            try await server.waitForRequests(pathPrefix: "/gate/\(gate)", count: 1)
            operation.cancel()
            await queue.waitUntilAllOperationsAreFinished()
            server.openGate(gate)
            let (span, attempts) = try await spans(tracer, attempts: 1)
            for span in [span, attempts[0]] {
                #expect(string(span, "error.type") == "cancelled")
                #expect(span.status?.code == .error)
                #expect(span.attributes.get("http.response.status_code") == nil)
            }
        }
    }

    @Test func aCancelledPendingRequestEndsItsOperationSpanWithoutAttempts() async throws {
        try await withServer { server in
            let tracer = InMemoryTracer()
            let queue = RequestQueue(tracer: tracer)
            queue.isSuspended = true
            let operation = queue.add(Request(url: server.url("/bytes/1")))
            operation.cancel()
            let (span, _) = try await spans(tracer, attempts: 0)
            #expect(string(span, "error.type") == "cancelled")
            #expect(span.status?.code == .error)
        }
    }

    @Test func aTransportFailureIsAnErrorOfItsCurlCode() async throws {
        try await withRefusingPort { port in
            let tracer = InMemoryTracer()
            let queue = RequestQueue(tracer: tracer)
            await #expect(throws: RequestError.self) {
                try await queue.response(for: Request(string: "http://127.0.0.1:\(port)/x"))
            }
            let (span, attempts) = try await spans(tracer, attempts: 1)
            for span in [span, attempts[0]] {
                #expect(string(span, "error.type") == "CURLE_COULDNT_CONNECT")
                #expect(span.status?.code == .error)
                #expect(int(span, "server.port") == Int64(port))
            }
        }
    }
}
