// With CQ_BENCH_METRICS=1 in the environment: a trivial in-memory swift-metrics backend is
// bootstrapped before any queue is made, so that scripts/callgrind-per-get measures what
// CurlQueue's metrics cost with a backend (docs/performance.md). Each value is kept under a
// mutex, as a real backend keeps it under a lock or in an atomic.
import CoreMetrics
import Foundation
import Synchronization

func bootstrapBenchMetricsIfAsked() {
    guard ProcessInfo.processInfo.environment["CQ_BENCH_METRICS"] == "1" else { return }
    MetricsSystem.bootstrap(BenchMetricsFactory())
}

final class BenchMetricsFactory: MetricsFactory {
    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler { BenchMetric() }
    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler { BenchMetric() }
    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler { BenchMetric() }
    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler { BenchMetric() }
    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler { BenchMetric() }
    func destroyCounter(_ handler: any CounterHandler) {}
    func destroyMeter(_ handler: any MeterHandler) {}
    func destroyRecorder(_ handler: any RecorderHandler) {}
    func destroyTimer(_ handler: any TimerHandler) {}
}

/// A count and a sum.
final class BenchMetric: CounterHandler, FloatingPointCounterHandler, MeterHandler, RecorderHandler, TimerHandler {
    private let value = Mutex<(count: Int64, sum: Double)>((0, 0))

    private func add(_ amount: Double) { value.withLock { $0.count += 1; $0.sum += amount } }
    func increment(by amount: Int64) { add(Double(amount)) }
    func increment(by amount: Double) { add(amount) }
    func decrement(by amount: Double) { add(-amount) }
    func set(_ value: Int64) { self.value.withLock { $0 = (1, Double(value)) } }
    func set(_ value: Double) { self.value.withLock { $0 = (1, value) } }
    func record(_ value: Int64) { add(Double(value)) }
    func record(_ value: Double) { add(value) }
    func recordNanoseconds(_ duration: Int64) { add(Double(duration)) }
    func reset() { value.withLock { $0 = (0, 0) } }
}
