import Foundation
import NIOConcurrencyHelpers
import NIOCore

/// The shared state of an ``OpenAPIFixtureServer``: the record, gates and waiters, behind one
/// lock; no lock is held while a waiter is resumed or a gate's callback runs.
final class OpenAPIFixtureState: Sendable {
    struct Waiter {
        let condition: @Sendable (OpenAPIFixtureServer.Snapshot) -> Bool
        let continuation: CheckedContinuation<Void, any Error>
    }

    struct State {
        var snapshot = OpenAPIFixtureServer.Snapshot()
        var connections: [Int: any Channel] = [:]
        var nextConnectionID = 0
        var isShutDown = false
        var openGates: Set<String> = []
        /// Callbacks waiting for a gate, by gate name.
        var gateWaiters: [String: [@Sendable () -> Void]] = [:]
        var waiters: [Int: Waiter] = [:]
        var nextWaiterID = 0
    }

    let box = NIOLockedValueBox(State())

    func accepted(_ channel: any Channel) -> Int? {
        box.withLockedValue { state in
            guard !state.isShutDown else { return nil }
            state.nextConnectionID += 1
            state.connections[state.nextConnectionID] = channel
            return state.nextConnectionID
        }
    }

    func closed(_ id: Int) {
        _ = box.withLockedValue { $0.connections.removeValue(forKey: id) }
    }

    /// Changes the record, then resumes the waiters whose condition now holds.
    func record(_ change: (inout OpenAPIFixtureServer.Snapshot) -> Void) {
        let ready = box.withLockedValue { state -> [CheckedContinuation<Void, any Error>] in
            change(&state.snapshot)
            let snapshot = state.snapshot
            let done = state.waiters.filter { $0.value.condition(snapshot) }
            for id in done.keys { state.waiters[id] = nil }
            return done.values.map(\.continuation)
        }
        for continuation in ready { continuation.resume() }
    }

    func openGate(_ name: String) {
        let callbacks = box.withLockedValue { state -> [@Sendable () -> Void] in
            state.openGates.insert(name)
            return state.gateWaiters.removeValue(forKey: name) ?? []
        }
        for callback in callbacks { callback() }
    }

    /// Calls `callback` once gate `name` is open: now, or from ``openGate(_:)``.
    func whenOpen(_ name: String, _ callback: @escaping @Sendable () -> Void) {
        let isOpen = box.withLockedValue { state -> Bool in
            if state.openGates.contains(name) { return true }
            state.gateWaiters[name, default: []].append(callback)
            return false
        }
        if isOpen { callback() }
    }

    func waitUntil(timeout: Duration, _ condition: @escaping @Sendable (OpenAPIFixtureServer.Snapshot) -> Bool) async throws {
        let id = box.withLockedValue { state -> Int in
            state.nextWaiterID += 1
            return state.nextWaiterID
        }
        let timer = NIOLockedValueBox<Task<Void, Never>?>(nil)
        defer { timer.withLockedValue { $0?.cancel() } }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let holds = box.withLockedValue { state -> Bool in
                if condition(state.snapshot) { return true }
                state.waiters[id] = Waiter(condition: condition, continuation: continuation)
                return false
            }
            if holds { return continuation.resume() }
            timer.withLockedValue { task in
                task = Task { [box] in
                    // The sleep IS the timeout: a waiter still there at its end fails as timed out.
                    guard (try? await Task.sleep(for: timeout)) != nil else { return }
                    let waiter = box.withLockedValue { $0.waiters.removeValue(forKey: id) }
                    waiter?.continuation.resume(throwing: OpenAPIFixtureServer.TimedOut(after: timeout))
                }
            }
        }
    }
}
