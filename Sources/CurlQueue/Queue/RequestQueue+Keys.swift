extension RequestQueue {
    /// An operation's identity, as the key the scheduler files it under.
    struct OperationKey: Hashable {
        private let address: UInt

        init(_ operation: RequestOperation) {
            address = UInt(bitPattern: ObjectIdentifier(operation))
        }

        static func == (lhs: Self, rhs: Self) -> Bool { lhs.address == rhs.address }
        func hash(into hasher: inout Hasher) { hasher.combine(address) }
    }

    /// A request's hash value, as the key the duplicate index files operations under.
    struct RequestHash: Hashable {
        let value: Int

        func hash(into hasher: inout Hasher) { hasher.combine(value) }
    }
}
