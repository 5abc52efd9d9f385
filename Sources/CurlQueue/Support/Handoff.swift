/// A value handed to another thread to be used and let go of there.
///
/// The engine hands the caller's handlers to their callback queues. A block that captured
/// them directly would leave the engine a reference to them until its `queue.async` call
/// returned; when the queue ran the block first, the engine's was the last reference, and a
/// `deinit` of something the handlers held ran on the engine thread, which runs no code of the
/// caller's. The block takes the value out of this box instead: whichever thread lets go of
/// the box last, the value goes where the block ran.
final class Handoff<Value: Sendable>: @unchecked Sendable {  // safe: written once before the hand-off (the dispatch orders it), then only touched by the one block that takes it
    private var value: Value?

    init(_ value: Value) { self.value = value }

    /// The value, once; nil after that.
    func take() -> Value? {
        defer { value = nil }
        return value
    }
}
