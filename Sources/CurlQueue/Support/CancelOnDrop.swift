/// Something whose work can be called off, from any thread, any number of times.
protocol Cancellable: Sendable {
    func cancel()
}

/// Cancels its target when the last reference to it goes: the owner that a sequence and its
/// iterators share, so that dropping them all stops the work nobody will read. Cancelling
/// finished work does nothing.
final class CancelOnDrop: Sendable {
    private let target: any Cancellable
    init(_ target: any Cancellable) { self.target = target }
    deinit { target.cancel() }
}
