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
///
/// The value and the mutex live in one heap object (a `ManagedBuffer` whose header is the
/// value and whose one element is the mutex), so a lock costs one allocation, not two: every
/// ``RequestOperation`` has one. The mutex stays at one address for the object's lifetime,
/// as a pthread mutex must. `Locked` is a struct holding that one reference, so copies of it
/// share the value and the mutex, as references to a class would.
package struct Locked<Value> {
    private final class Storage: ManagedBuffer<Value, pthread_mutex_t> {
        deinit {
            withUnsafeMutablePointerToElements { mutex in
                pthread_mutex_destroy(mutex)
                mutex.deinitialize(count: 1)
            }
        }
    }

    private let storage: Storage

    package init(_ value: Value) {
        storage = unsafeDowncast(Storage.create(minimumCapacity: 1) { _ in value }, to: Storage.self)
        storage.withUnsafeMutablePointerToElements { mutex in
            mutex.initialize(to: pthread_mutex_t())
            pthread_mutex_init(mutex, nil)
        }
    }

    /// Runs `body` with the lock held. `body` must not call user code or block.
    package func withLock<T, E: Error>(_ body: (inout Value) throws(E) -> T) throws(E) -> T {
        try storage.withUnsafeMutablePointers { value, mutex throws(E) in
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            return try body(&value.pointee)
        }
    }
}

// Safe: the value is only touched with the mutex held, and `storage` never escapes. Only for a
// Sendable value (as NIO's `NIOLockedValueBox`): a lock does not make a non-Sendable value safe
// to hand out of `withLock` to another thread.
extension Locked: @unchecked Sendable where Value: Sendable {}

