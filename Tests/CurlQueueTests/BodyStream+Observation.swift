@testable import CurlQueue
import CurlQueueTestHelpers

/// What the end-to-end backpressure tests observe of a body stream: read from its state
/// machine under its lock.
extension BodyStream {
    /// The most bytes that were ever handed over and not yet consumed.
    var highWaterBytes: Int { state.withLock { $0.highWater } }
    /// How many times an offer was refused (the transfer paused).
    var pauseCount: Int { state.withLock { $0.pauseCount } }
    /// Bytes handed over and not yet consumed.
    var outstandingBytes: Int { state.withLock { $0.outstanding } }

    /// Returns once the transfer is paused (an offer was refused and no resume has run since)
    /// or the stream ended: a test's consumer waits here to be as slow as it can.
    func waitUntilPausedOrEnded() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            if state.withLock({ $0.pausedOrEnded(orWait: continuation) }) { continuation.resume() }
        }
    }
}
