extension FixtureServer {
    /// Opens the gate `name`: every request waiting on `/gate/NAME` now gets `200 "open NAME"`, and
    /// so will later ones. Opening a gate twice is harmless; gates stay open for the server's
    /// lifetime.
    public func openGate(_ name: String) {
        state.openGate(name)
    }
}

extension ServerState {
    /// Either reports that gate `name` is already open (returns `nil`: answer now) or stores
    /// `onOpen`, to be called once from whichever thread opens the gate, and returns an ID for
    /// ``cancelGateWaiter(name:id:)``.
    func waitForGate(_ name: String, onOpen: @escaping @Sendable () -> Void) -> Int? {
        mutex.withLockedValue { state in
            if state.openGates.contains(name) {
                return nil
            }
            let id = state.nextGateWaiterID
            state.nextGateWaiterID += 1
            state.gateWaiters[name, default: [:]][id] = onOpen
            return id
        }
    }

    /// Forgets a waiter whose connection went away.
    func cancelGateWaiter(name: String, id: Int) {
        mutex.withLockedValue { state in
            state.gateWaiters[name]?[id] = nil
            if state.gateWaiters[name]?.isEmpty == true {
                state.gateWaiters[name] = nil
            }
        }
    }

    func openGate(_ name: String) {
        let waiters = mutex.withLockedValue { state -> [@Sendable () -> Void] in
            state.openGates.insert(name)
            let waiters = state.gateWaiters.removeValue(forKey: name) ?? [:]
            return waiters.sorted { $0.key < $1.key }.map(\.value)
        }
        for waiter in waiters {
            waiter()
        }
    }
}
