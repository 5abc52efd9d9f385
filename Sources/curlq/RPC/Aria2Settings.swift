import CurlQueue
import Foundation
import NIOConcurrencyHelpers

/// The daemon's options that `aria2.changeGlobalOption` may change while it runs, shared by the
/// RPC and the worker's request preparation.
final class Aria2Settings: Sendable {
    private struct State {
        var overallRate: SharedRateLimit?
        var maxConcurrent: Int
    }

    private let state: NIOLockedValueBox<State>
    /// `-j` at start: the most jobs the worker holds at once.
    let startConcurrent: Int
    private let queue: RequestQueue

    init(overallRate: SharedRateLimit?, concurrent: Int, queue: RequestQueue) {
        state = NIOLockedValueBox(State(overallRate: overallRate, maxConcurrent: concurrent))
        startConcurrent = concurrent
        self.queue = queue
    }

    /// The limit for the daemon's transfers together (nil: none); a change applies to the
    /// transfers that start after it.
    var overallRate: SharedRateLimit? { state.withLockedValue { $0.overallRate } }

    var maxConcurrent: Int { state.withLockedValue { $0.maxConcurrent } }

    func setOverallRate(_ bytesPerSecond: Int64) {
        state.withLockedValue { $0.overallRate = bytesPerSecond > 0 ? SharedRateLimit(bytesPerSecond: bytesPerSecond) : nil }
    }

    /// Downloads at once, 1 to `-j`: the worker holds up to `-j` jobs and runs this many of them.
    func setMaxConcurrent(_ count: Int) {
        state.withLockedValue { $0.maxConcurrent = count }
        queue.maxConcurrentRequestCount = count
    }
}
