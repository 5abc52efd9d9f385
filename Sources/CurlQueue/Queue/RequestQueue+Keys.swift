extension RequestQueue {
    /// An operation's identity, as the key the scheduler files it under.
    ///
    /// The queue's dictionaries are looked up several times per operation, and a dictionary
    /// hashes its key on every lookup, insertion and deletion (and rehashes neighbours on
    /// deletion): with `ObjectIdentifier` or `Int` keys that is a SipHash run each time, the
    /// largest part of the queue's bookkeeping. These keys give the dictionary a cheap
    /// bijective mix of the key and the dictionary's seed instead (`_rawHashValue(seed:)`,
    /// the hook `Dictionary` calls). That is safe from crafted collisions: an operation's key
    /// is its address, and a request's hash value comes from the seeded `Hasher`, so neither
    /// can be predicted from outside the process.
    struct OperationKey: Hashable {
        private let address: UInt

        init(_ operation: RequestOperation) {
            address = UInt(bitPattern: ObjectIdentifier(operation))
        }

        static func == (lhs: Self, rhs: Self) -> Bool { lhs.address == rhs.address }
        func hash(into hasher: inout Hasher) { hasher.combine(address) }
        func _rawHashValue(seed: Int) -> Int { mix(UInt64(address), seed: seed) }
    }

    /// A request's hash value, as the key the duplicate index files operations under; see
    /// ``OperationKey`` for why it hashes itself.
    struct RequestHash: Hashable {
        let value: Int

        func hash(into hasher: inout Hasher) { hasher.combine(value) }
        func _rawHashValue(seed: Int) -> Int { mix(UInt64(UInt(bitPattern: value)), seed: seed) }
    }
}

/// The finalizer of MurmurHash3 (a bijection on 64 bits) of `value` xor `seed`.
@inline(__always)
private func mix(_ value: UInt64, seed: Int) -> Int {
    var x = value ^ UInt64(UInt(bitPattern: seed))
    x ^= x >> 33
    x &*= 0xff51_afd7_ed55_8ccd
    x ^= x >> 33
    x &*= 0xc4ce_b9fe_1a85_ec53
    x ^= x >> 33
    return Int(Int64(bitPattern: x))
}
