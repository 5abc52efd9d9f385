#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A value guarded by a pthread mutex.
///
/// `Synchronization.Mutex` locks with raw futex calls on Linux, which ThreadSanitizer cannot
/// see, so every access under it is reported as a race; a pthread mutex is understood by the
/// sanitizers, and CurlQueue runs its suite under ThreadSanitizer.
final class Locked<Value>: @unchecked Sendable {  // safe: `value` is only touched with `mutex` held
    private var value: Value
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the lock held. `body` must not call user code or block.
    func withLock<T, E: Error>(_ body: (inout Value) throws(E) -> T) throws(E) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
