extension RequestQueue {
    /// The queue's operations by the value of their requests, for duplicate detection and
    /// ``RequestQueue/cancel(_:)``.
    ///
    /// Operations are filed under their request's hash value, which the queue computes once
    /// per operation: hashing a whole `Request` (URL, header fields, body, options) costs far
    /// more than the rest of adding it, and a dictionary keyed by `Request` would hash it on
    /// every lookup and keep a second copy of it per key. Requests under one hash value are
    /// told apart by full value equality, so equal means what `Request`'s `==` says.
    ///
    /// Almost every hash value files one operation, which is kept without an array.
    struct DuplicateIndex {
        private enum Bucket {
            case one(RequestOperation)
            /// Two or more, in the order they were added.
            case many([RequestOperation])
        }

        private var buckets: [RequestHash: Bucket] = [:]

        /// Files `operation`, whose request hashes to `hash`. With `findingEqual`, returns the
        /// operations filed before it whose requests equal its request, in the order they
        /// were added; otherwise returns nothing.
        mutating func insert(_ operation: RequestOperation, hash: Int, findingEqual: Bool) -> [RequestOperation] {
            var equal: [RequestOperation] = []
            Self.insert(operation, into: &buckets[RequestHash(value: hash)], findingEqual: findingEqual, equal: &equal)
            return equal
        }

        /// Removes `operation`, filed under `hash`.
        mutating func remove(_ operation: RequestOperation, hash: Int) {
            Self.remove(operation, from: &buckets[RequestHash(value: hash)])
        }

        /// The operations whose requests equal `request`, which hashes to `hash`, in the order
        /// they were added.
        func operations(equalTo request: Request, hash: Int) -> [RequestOperation] {
            switch buckets[RequestHash(value: hash)] {
            case nil:
                return []
            case .one(let operation):
                return operation.request == request ? [operation] : []
            case .many(let operations):
                return operations.filter { $0.request == request }
            }
        }

        // One dictionary lookup each: the subscript's modify accessor inserts, updates or
        // deletes the slot it found.

        private static func insert(
            _ operation: RequestOperation, into bucket: inout Bucket?, findingEqual: Bool, equal: inout [RequestOperation]
        ) {
            switch bucket {
            case nil:
                bucket = .one(operation)
            case .one(let other):
                if findingEqual, other.request == operation.request { equal = [other] }
                bucket = .many([other, operation])
            case .many(var operations):
                if findingEqual { equal = operations.filter { $0.request == operation.request } }
                bucket = nil  // lets `operations` be appended to in place
                operations.append(operation)
                bucket = .many(operations)
            }
        }

        private static func remove(_ operation: RequestOperation, from bucket: inout Bucket?) {
            switch bucket {
            case nil:
                break
            case .one(let other):
                if other === operation { bucket = nil }
            case .many(var operations):
                bucket = nil  // lets `operations` be changed in place
                if let index = operations.firstIndex(where: { $0 === operation }) { operations.remove(at: index) }
                switch operations.count {
                case 0: bucket = nil
                case 1: bucket = .one(operations[0])
                default: bucket = .many(operations)
                }
            }
        }
    }
}
