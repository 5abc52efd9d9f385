public import CurlQueueDurable
public import ServiceLifecycle

/// A ``CurlQueueDurable/DurableWorker`` as a swift-service-lifecycle `Service`, to run in a
/// `ServiceGroup` beside a daemon's other services.
///
/// - Graceful shutdown (the group's `triggerGracefulShutdown()`, or one of its
///   `gracefulShutdownSignals` such as SIGTERM) calls the worker's `stop(drain:)` with
///   ``drain``: it claims nothing more, lets running transfers and handlers go on for up to
///   ``drain``, then gives the rest back to the store with their `.part` files kept (a release
///   does not count as an attempt). ``run()`` returns once no job is held.
/// - Cancellation of the task running ``run()`` (the group cancelling its services, or a
///   cancellation signal) stops at once: `stop(drain: .zero)`, every transfer cancelled and its
///   job given back the same way. ``run()`` still waits for those releases before it returns,
///   so a job is never left `running` in the store by a cancelled service.
/// - A worker stopped some other way (its own `stop(drain:)`) ends ``run()`` as well; a
///   `ServiceGroup` then ends by its `successTerminationBehavior` (cancelling the group by
///   default).
///
/// This is a wrapper rather than `extension DurableWorker: Service`: the worker's own
/// `run()` already has the `Service` requirement's signature and knows nothing of graceful
/// shutdown, so such a conformance would pick it and a SIGTERM would never reach the worker.
public struct DurableWorkerService: Service {
    /// The worker it runs.
    public let worker: DurableWorker
    /// How long a graceful shutdown lets running transfers and handlers go on before the
    /// rest are given back to the store.
    public var drain: Duration

    /// A service running `worker`; a graceful shutdown gives its transfers `drain` to finish.
    public init(_ worker: DurableWorker, drain: Duration = .seconds(30)) {
        self.worker = worker
        self.drain = drain
    }

    /// Runs the worker until it has stopped and given every job it held back (or recorded it);
    /// with its store unreachable, at most the worker's `storeGrace` past the drain deadline
    /// (the worker's `jobsLeftLeased` then names what it could not give back).
    /// Throws only when the worker cannot register with its store.
    public func run() async throws {
        // The worker's run() turns this task's cancellation into `stop(drain: .zero)` itself.
        try await withGracefulShutdownHandler {
            try await worker.run()
        } onGracefulShutdown: { [worker, drain] in
            worker.stop(drain: drain)
        }
    }
}
