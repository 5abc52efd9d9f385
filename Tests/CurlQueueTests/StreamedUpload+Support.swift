@testable import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation

/// `total` pattern bytes in chunks of `chunkSize`, each made when the iterator asks for it, after
/// `before(index)` returned (a hook that waits for an event, or throws). Counts what it handed
/// out and how its iteration ended.
struct PatternUpload: AsyncSequence, Sendable {
    typealias Element = Data
    let total: Int
    let chunkSize: Int
    let record: UploadRecord
    let before: @Sendable (Int) async throws -> Void

    init(total: Int, chunkSize: Int, record: UploadRecord = UploadRecord(),
         before: @escaping @Sendable (Int) async throws -> Void = { _ in }) {
        self.total = total
        self.chunkSize = chunkSize
        self.record = record
        self.before = before
    }

    func makeAsyncIterator() -> Iterator { Iterator(upload: self) }

    struct Iterator: AsyncIteratorProtocol {
        let upload: PatternUpload
        var offset = 0
        var index = 0

        mutating func next() async throws -> Data? {
            do {
                try await upload.before(index)
            } catch {
                upload.record.ended(error)
                throw error
            }
            guard offset < upload.total else {
                upload.record.ended(nil)
                return nil
            }
            let count = Swift.min(upload.chunkSize, upload.total - offset)
            let chunk = Data(FixtureServer.expectedBytes(offset: offset, count: count))
            offset += count
            index += 1
            upload.record.produced(count)
            return chunk
        }
    }
}

/// What a ``PatternUpload`` handed out, and an event for the end of its iteration.
final class UploadRecord: Sendable {
    private struct State {
        var produced = 0
        var endedWith: Result<Void, any Error>?
        var endWaiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Locked(State())

    var produced: Int { state.withLock { $0.produced } }

    func produced(_ count: Int) { state.withLock { $0.produced += count } }

    func ended(_ error: (any Error)?) {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            if state.endedWith == nil { state.endedWith = error.map { .failure($0) } ?? .success(()) }
            defer { state.endWaiters = [] }
            return state.endWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the iteration ended (the sequence returned nil or threw), with the error.
    func waitForEnd() async -> (any Error)? {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ended = state.withLock { state -> Bool in
                if state.endedWith != nil { return true }
                state.endWaiters.append(continuation)
                return false
            }
            if ended { continuation.resume() }
        }
        return state.withLock { state in
            if case .failure(let error)? = state.endedWith { return error }
            return nil
        }
    }
}

/// A hook for ``PatternUpload`` that never returns unless its task is cancelled, which it
/// reports by throwing `CancellationError` (the way a sequence that honours cancellation ends).
func waitForCancellation() async throws {
    let never = AsyncStream<Void> { _ in }
    for await _ in never {}
    throw CancellationError()
}

extension UploadChannel {
    /// The most bytes ever buffered, and how often the producer waited for room.
    var highWaterBytes: Int { state.withLock { $0.highWater } }
    var producerWaitCount: Int { state.withLock { $0.producerWaits } }
    var bytesProduced: Int64 { state.withLock { $0.produced } }

    /// Returns true once the producer waits for room (now, or next), false when the body ended
    /// or the operation did first.
    func waitUntilProducerWaits() async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            if let now = state.withLock({ $0.producerWaits(orWatch: continuation) }) { continuation.resume(returning: now) }
        }
    }
}

/// The upload's receipt from the OpenAPI fixture server.
struct UploadReceipt: Decodable {
    var bytes: Int
    var checksum: Int64
}
