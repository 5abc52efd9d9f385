@testable import CurlQueue

// The scheduler driven by hand, as QueueSchedulerTests drive it: items without payloads, and
// the IDs that start returned as a list. The queue itself always passes payloads and hosts.

extension RequestQueue.Scheduler {
    /// Picks the items that may start now, marks them running, and returns them in order.
    /// Every item in the queue must have been added with its host.
    mutating func nextToStart() -> [ID] {
        nextToStart(hostOf: { _ in preconditionFailure("an item was added without its host") })
    }

    /// Picks the items that may start now, marks them running, and returns them in order.
    /// While there is a per-host limit, `hostOf` gives the host of an item added without
    /// one, once, when it starts or parks; with none, it is not called.
    mutating func nextToStart(hostOf: (ID) -> String) -> [ID] {
        var started: [ID] = []
        startNext(hostOf: { id, _ in hostOf(id) }, each: { id, _ in started.append(id) })
        return started
    }

    /// Sets the per-host limit, for items all added with their hosts.
    mutating func setMaxPerHost(_ limit: Int) {
        setMaxPerHost(limit, hostOf: { _, _ in preconditionFailure("an item was added without its host") })
    }

    /// Sets the per-host limit, with `hostOf` given only each item's ID.
    mutating func setMaxPerHost(_ limit: Int, hostOf: (ID) -> String) {
        setMaxPerHost(limit, hostOf: { id, _ in hostOf(id) })
    }
}

extension RequestQueue.Scheduler where Payload == Void {
    /// Adds a pending item whose host is known. Returns false when `id` is already in the queue.
    @discardableResult
    mutating func add(_ id: ID, priority: Int, host: String) -> Bool {
        add(id, payload: (), priority: priority, host: host)
    }

    /// Adds a pending item whose host ``nextToStart(hostOf:)`` asks for when it needs it.
    /// Returns false when `id` is already in the queue.
    @discardableResult
    mutating func add(_ id: ID, priority: Int) -> Bool {
        add(id, payload: (), priority: priority)
    }
}
