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
    /// Almost every hash value files one operation, which is kept without a collection. More
    /// than one (equal requests on a queue that allows duplicates, or a rare collision) are
    /// kept by identity with the sequence number they were added with: adding and removing
    /// one costs the same whatever the number of others, and the rare lookups that need them
    /// in order (duplicate cancellation, ``RequestQueue/cancel(_:)``) sort them, which costs
    /// less than the cancellations they lead to. (An array in added order cost O(n) per
    /// removal: 100,000 equal requests spent most of their time moving its elements.)
    struct DuplicateIndex {
        /// Two or more operations under one hash value.
        private struct Many {
            /// Each operation and the sequence number it was added with.
            var operations: [OperationKey: (sequence: Int, operation: RequestOperation)] = [:]
            var nextSequence = 0

            mutating func append(_ operation: RequestOperation) {
                operations[OperationKey(operation)] = (nextSequence, operation)
                nextSequence += 1
            }

            /// The operations for which `isIncluded` is true, in the order they were added.
            func ordered(where isIncluded: (RequestOperation) -> Bool) -> [RequestOperation] {
                var found: [(sequence: Int, operation: RequestOperation)] = []
                for entry in operations.values where isIncluded(entry.operation) { found.append(entry) }
                found.sort { $0.sequence < $1.sequence }
                return found.map(\.operation)
            }
        }

        private enum Bucket {
            case one(RequestOperation)
            case many(Many)
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
            case .many(let many):
                return many.ordered { $0.request == request }
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
                var many = Many()
                many.append(other)
                many.append(operation)
                bucket = .many(many)
            case .many(var many):
                if findingEqual { equal = many.ordered { $0.request == operation.request } }
                bucket = nil  // lets `many` be appended to in place
                many.append(operation)
                bucket = .many(many)
            }
        }

        private static func remove(_ operation: RequestOperation, from bucket: inout Bucket?) {
            switch bucket {
            case nil:
                break
            case .one(let other):
                if other === operation { bucket = nil }
            case .many(var many):
                bucket = nil  // lets `many` be changed in place
                many.operations.removeValue(forKey: OperationKey(operation))
                switch many.operations.count {
                case 0: bucket = nil
                case 1: bucket = .one(many.operations.first!.value.operation)
                default: bucket = .many(many)
                }
            }
        }
    }
}
