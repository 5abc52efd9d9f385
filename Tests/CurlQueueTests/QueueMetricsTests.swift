import CoreMetrics
import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import MetricsTestKit
import Testing

/// A queue made with a metrics factory in effect records its requests there (swift-metrics,
/// docs/observability.md); one made without records nothing.
@Suite struct QueueMetricsTests {
    private func finished(_ metrics: TestMetrics, _ dimensions: [(String, String)]) -> Int64 {
        metrics.counterTotal(label: "curlqueue_requests_finished_total", dimensions: dimensions)
    }

    @Test func outcomesStatusClassesRetriesBytesAndTimingsAreRecorded() async throws {
        try await withServer { server in
            try await withRefusingPort { refused in
                let metrics = TestMetrics()
                let queue = withMetricsFactory(metrics) { RequestQueue(maxConcurrentRequestCount: 4, name: "downloads") }
                #expect(queue.name == "downloads")
                _ = try await queue.response(for: Request(url: server.url("/bytes/1000")))
                _ = try await queue.response(for: Request(url: server.url("/status/404")))
                await #expect(throws: RequestError.self) {
                    try await queue.response(for: Request(string: "http://127.0.0.1:\(refused)/x"))
                }
                let flaky = RequestOperation(request: Request(url: server.url("/flaky/metrics-\(UUID())?failures=1")))
                flaky.autoRetry = true
                flaky.retryPolicy = RetryPolicy(initialBackoff: .milliseconds(10), retryableStatuses: [503])
                try queue.add(flaky)
                await queue.waitUntilAllOperationsAreFinished()

                let queueLabel = ("queue", "downloads")
                #expect(metrics.counterTotal(label: "curlqueue_requests_started_total", dimensions: [queueLabel]) == 4)
                #expect(finished(metrics, [queueLabel, ("outcome", "response"), ("status_class", "2xx")]) == 2)
                #expect(finished(metrics, [queueLabel, ("outcome", "response"), ("status_class", "4xx")]) == 1)
                #expect(finished(metrics, [queueLabel, ("outcome", "error"), ("error_type", "CURLE_COULDNT_CONNECT")]) == 1)
                #expect(metrics.counterTotal(label: "curlqueue_retries_total", dimensions: [queueLabel, ("reason", "status_503")]) == 1)
                #expect(metrics.counterTotal(label: "curlqueue_response_body_bytes_received_total", dimensions: [queueLabel]) >= 1000)
                let total = try metrics.expectTimer("curlqueue_request_duration_seconds", [queueLabel])
                #expect(total.values.count == 3)  // the responses, not the failure
                #expect(total.values.allSatisfy { $0 > 0 })
                #expect(try metrics.expectTimer("curlqueue_first_byte_duration_seconds", [queueLabel]).values.count == 3)
                #expect(try metrics.expectMeter("curlqueue_requests_running", [queueLabel]).lastValue == 0)
                #expect(try metrics.expectMeter("curlqueue_requests_pending", [queueLabel]).lastValue == 0)
            }
        }
    }

    @Test func pendingAndRunningFollowTheQueue() async throws {
        try await withServer { server in
            let metrics = TestMetrics()
            let queue = withMetricsFactory(metrics) { RequestQueue(maxConcurrentRequestCount: 1, name: "gated") }
            let gate = "metrics-\(UUID())"
            let first = queue.add(Request(url: server.url("/gate/\(gate)")))
            let second = queue.add(Request(url: server.url("/bytes/10")))
            try await server.waitForRequests(pathPrefix: "/gate", count: 1)
            let running = try metrics.expectMeter("curlqueue_requests_running", [("queue", "gated")])
            let pending = try metrics.expectMeter("curlqueue_requests_pending", [("queue", "gated")])
            #expect(running.lastValue == 1)
            #expect(pending.lastValue == 1)
            second.cancel()  // a pending one leaves: pending goes down, running stays
            await drain()
            #expect(pending.lastValue == 0)
            #expect(running.lastValue == 1)
            #expect(finished(metrics, [("queue", "gated"), ("outcome", "cancelled")]) == 1)
            server.openGate(gate)
            await queue.waitUntilAllOperationsAreFinished()
            #expect(running.lastValue == 0)
            #expect(first.isFinished)
        }
    }

    @Test func hostsAreLabelsOnlyWhenAsked() async throws {
        try await withServer { server in
            let metrics = TestMetrics()
            let (plain, byHost) = withMetricsFactory(metrics) {
                (RequestQueue(name: "plain"), RequestQueue(name: "by-host", labelsMetricsByHost: true))
            }
            _ = try await plain.response(for: Request(url: server.url("/bytes/1")))
            _ = try await byHost.response(for: Request(url: server.url("/bytes/1")))
            let plainLabels = metrics.counters(label: "curlqueue_requests_started_total", dimensions: [("queue", "plain")])
                .map { $0.dimensions.map(\.0) }
            #expect(plainLabels == [["queue"]])
            #expect(metrics.counterTotal(label: "curlqueue_requests_started_total", dimensions: [("queue", "by-host"), ("host", "127.0.0.1")]) == 1)
        }
    }

    @Test func aQueueMadeWithoutABackendRecordsNothing() async throws {
        try await withServer { server in
            let metrics = TestMetrics()
            let queue = RequestQueue(name: "unobserved")  // the no-op factory is in effect here
            try await withMetricsFactory(metrics) {
                _ = try await queue.response(for: Request(url: server.url("/bytes/1")))
            }
            #expect(metrics.counters.isEmpty && metrics.meters.isEmpty && metrics.timers.isEmpty)
        }
    }
}
