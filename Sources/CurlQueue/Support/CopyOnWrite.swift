/// A value kept behind one reference and copied when written while shared: a copy of a
/// `CopyOnWrite` retains one object instead of every reference the value holds.
///
/// `Request` and `Response` keep their stored properties this way. Each is copied several times
/// between its caller and libcurl (into an operation, a transfer, an outcome, a result handed to
/// another thread), and a copy of either retained and later released each of its strings, URLs,
/// field lists and buffers.
struct CopyOnWrite<Value: Sendable>: Sendable {
    /// The shared value.
    private final class Storage: @unchecked Sendable {  // safe: `value` changes only through a CopyOnWrite that holds the sole reference (`isKnownUniquelyReferenced`), so a storage two threads can see is never written
        /// No dynamic exclusivity checks, which every read would pay for: a storage is written
        /// only through the one `CopyOnWrite` that holds it, so two overlapping accesses to it
        /// are two overlapping accesses to that value, which Swift's own checks on the value
        /// (static for a local, dynamic for a class's property) catch first.
        @exclusivity(unchecked) var value: Value

        init(_ value: Value) { self.value = value }
    }

    private var storage: Storage

    init(_ value: Value) { storage = Storage(value) }

    /// The value.
    var value: Value { storage.value }

    /// Changes the value in place once this is the only holder of it (the value is copied into
    /// a storage of its own first when another holder shares it), so a change to one part of
    /// the value copies nothing else.
    mutating func modify<Result>(_ change: (inout Value) throws -> Result) rethrows -> Result {
        if !isKnownUniquelyReferenced(&storage) { storage = Storage(storage.value) }
        return try change(&storage.value)
    }

    /// Whether `self` and `other` share one storage, and so hold equal values.
    func isShared(with other: CopyOnWrite) -> Bool { storage === other.storage }
}
