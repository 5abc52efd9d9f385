extension RequestQueue {
    /// Something that happened to an operation of the queue.
    public enum Event: Sendable {
        /// The operation joined the queue.
        case added(RequestOperation)
        /// The operation left the queue's backlog and its first attempt began. Comes before any
        /// progress event of the operation.
        case started(RequestOperation)
        /// Throttled progress of the operation's download and upload.
        case progress(RequestOperation, download: TransferProgress, upload: TransferProgress)
        /// An attempt failed and the next one, `attempt`, starts after `delay`.
        case retrying(RequestOperation, attempt: Int, delay: Duration)
        /// The operation's outcome.
        case finished(RequestOperation, Result<Response, RequestError>)
    }

    /// A stream of the queue's events, for dashboards and progress displays. Each call makes
    /// a new stream that sees events of operations added after it was made; it ends when the
    /// consuming task stops iterating. Events are buffered (the newest 4,096 are kept for a slow reader).
    public func events() -> AsyncStream<Event> {
        let (stream, continuation) = AsyncStream<Event>.makeStream(bufferingPolicy: .bufferingNewest(4096))
        let id = state.withLock { state in
            let id = state.nextSubscriberID
            state.nextSubscriberID += 1
            state.subscribers[id] = continuation
            return id
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    /// Hands an operation's observation to the streams that were listening when it was added.
    static func publish(
        _ observation: RequestOperation.Observation, of operation: RequestOperation,
        to subscribers: [AsyncStream<Event>.Continuation]
    ) {
        let event: Event = switch observation {
        case .started: .started(operation)
        case .progress(let download, let upload): .progress(operation, download: download, upload: upload)
        case .retrying(let attempt, let delay): .retrying(operation, attempt: attempt, delay: delay)
        case .finished(let result): .finished(operation, result)
        }
        for subscriber in subscribers { subscriber.yield(event) }
    }
}
