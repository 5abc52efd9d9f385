import CoreMetrics
import CurlQueue
import CurlQueueDurable
import CurlQueueSQLite
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing
@testable import curlq

/// The daemon's Prometheus text: real transfers and a real store, the text parsed back.
@Suite struct MetricsExpositionTests {
    /// One sample of the text: its name, labels and value.
    struct Sample: Hashable {
        var name: String
        var labels: [String: String]
        var value: Double
    }

    /// Parses the exposition's sample lines (`name{a="b",…} value`); comments are skipped.
    static func samples(_ text: String) -> [Sample] {
        text.split(separator: "\n").compactMap { line -> Sample? in
            guard !line.hasPrefix("#"), let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...])
            else { return nil }
            let series = line[..<space]
            guard let brace = series.firstIndex(of: "{") else { return Sample(name: String(series), labels: [:], value: value) }
            var labels: [String: String] = [:]
            for pair in series[series.index(after: brace)..<series.index(before: series.endIndex)].split(separator: ",") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                guard parts.count == 2 else { continue }
                labels[String(parts[0])] = String(parts[1].dropFirst().dropLast())
            }
            return Sample(name: String(series[..<brace]), labels: labels, value: value)
        }
    }

    @Test func tenThousandDistinctURLsKeepTheLabelSetsBounded() async throws {
        try await withServer { server in
            let exposition = MetricsExposition()
            let queue = withMetricsFactory(exposition.factory) { RequestQueue(maxConcurrentRequestCount: 16, name: "daemon") }
            let count = 10_000
            for index in 0..<count {
                queue.add(Request(url: server.url("/bytes/16?n=\(index)")))
            }
            queue.add(Request(url: server.url("/status/404?n=x")))
            await queue.waitUntilAllOperationsAreFinished()
            let text = exposition.text()
            let samples = Self.samples(text)
            // Looked up out of #expect: written as `samples.first { … }?.value` inside it, the
            // lookup gave the first sample's value whatever the labels (cause not found).
            func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
                for sample in samples where sample.name == name && labels.allSatisfy({ sample.labels[$0.key] == $0.value }) {
                    return sample.value
                }
                return nil
            }
            let ok = value("curlqueue_requests_finished_total", ["status_class": "2xx"])
            let notFound = value("curlqueue_requests_finished_total", ["status_class": "4xx"])
            let started = value("curlqueue_requests_started_total")
            let running = value("curlqueue_requests_running")
            let received = value("curlqueue_response_body_bytes_received_total") ?? 0
            let buckets = value("curlqueue_request_duration_seconds_count")
            #expect(ok == Double(count))
            #expect(notFound == 1)
            #expect(started == Double(count + 1))
            #expect(running == 0)
            #expect(buckets == Double(count + 1))
            #expect(received >= Double(16 * count))
            // Bounded: a handful of series per metric, none naming a URL.
            let series = Set(samples.map { Sample(name: $0.name, labels: $0.labels, value: 0) })
            #expect(series.count < 200, "\(series.count) series")
            #expect(!text.contains("n=") && !text.contains("/bytes"))
            var otherQueues = 0
            for sample in samples where sample.labels["queue"] != "daemon" { otherQueues += 1 }
            #expect(otherQueues == 0)
        }
    }

    @Test func theStoresJobCountsAreAskedAtEachRendering() async throws {
        try await withFolder { folder in
            let store = try SQLiteJobStore(path: folder.appendingPathComponent("jobs.sqlite").path)
            let specs = (0..<3).map { JobSpec(kind: "download", request: JobRequest(url: "http://127.0.0.1:9/\($0)")) }
            let ids = try await store.enqueue(specs, queue: "mirror", order: .fifo).map(\.id)
            let exposition = MetricsExposition()
            func value(_ name: String, state: String?, in text: String) -> Double? {
                for sample in Self.samples(text) where sample.name == name && sample.labels["state"] == state {
                    return sample.value
                }
                return nil
            }
            var text = await exposition.text(store: store, queue: "mirror")
            let available = value("curlqueue_durable_jobs", state: "available", in: text)
            let running = value("curlqueue_durable_jobs", state: "running", in: text)
            let up = value("curlqueue_durable_store_up", state: nil, in: text)
            let age = value("curlqueue_durable_oldest_available_job_age_seconds", state: nil, in: text) ?? -1
            let workers = value("curlqueue_durable_workers_alive", state: nil, in: text)
            #expect(available == 3)
            #expect(running == 0)
            #expect(up == 1)
            #expect(age >= 0 && age < 60)
            #expect(workers == 0)
            _ = try await store.cancel(.id(ids[0]))
            text = await exposition.text(store: store, queue: "mirror")
            let availableAfter = value("curlqueue_durable_jobs", state: "available", in: text)
            let cancelled = value("curlqueue_durable_jobs", state: "cancelled", in: text)
            #expect(availableAfter == 2)
            #expect(cancelled == 1)
        }
    }
}
