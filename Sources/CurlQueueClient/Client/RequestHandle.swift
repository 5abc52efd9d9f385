import CurlQueue

/// A client call started with closures or a delegate: cancel it, start it again, or — for an
/// unmanaged call — keep it alive.
///
/// Lifetimes (NitroConnection's managed and unmanaged connections):
/// - ``Lifetime-swift.enum/managed`` (the default): the call runs to its end whether or not
///   the handle is kept. For fire-and-forget calls; keep the handle only to cancel.
/// - ``Lifetime-swift.enum/unmanaged``: the call is cancelled when its handle is deinitialized,
///   so it lives exactly as long as the object that holds the handle — a screen that loads
///   search results cancels them by going away. A caller that drops the handle at once gets
///   `onError(.transport(.cancelled))`.
///
/// The running call never holds its handle, only the other way round, so dropping the last
/// reference to an unmanaged handle is what ends the call. All members are safe from any
/// thread.
public final class RequestHandle: Sendable, Identifiable {
    /// Whether a call outlives its handle.
    public enum Lifetime: Hashable, Sendable {
        /// The call runs to its end even when the handle is dropped.
        case managed
        /// The call is cancelled when the handle is deinitialized.
        case unmanaged
    }

    /// A call's identity, unique in the process; given to delegate methods.
    public struct ID: Hashable, Sendable, CustomStringConvertible {
        let value: Int
        /// `call#N`.
        public var description: String { "call#\(value)" }
    }

    /// This call's identity.
    public let id: ID
    /// Whether the call outlives this handle.
    public let lifetime: Lifetime
    let call: CallState
    private let restart: @Sendable (Lifetime) -> RequestHandle

    init(id: ID, lifetime: Lifetime, call: CallState, restart: @escaping @Sendable (Lifetime) -> RequestHandle) {
        self.id = id
        self.lifetime = lifetime
        self.call = call
        self.restart = restart
    }

    deinit {
        if lifetime == .unmanaged { call.cancel() }
    }

    /// Cancels the call, from any thread. If its outcome was not decided yet, it will be
    /// `onError(.transport(.cancelled))` (`didFail` for a delegate) — even when the transfer
    /// completes at the same moment — and its transfer leaves the engine. Once the outcome is
    /// decided, does nothing: the outcome callback runs exactly once either way. (A batch's
    /// handle cancels the calls still running; calls already done keep their results.)
    public func cancel() {
        call.cancel()
    }

    /// True once the outcome is decided (its callback may still be on its way).
    public var isFinished: Bool { call.isFinished }

    /// Sends the same call again — same request, callbacks or delegate, and lifetime — and
    /// returns the new call's handle. This call is not touched: cancel it first if only the new
    /// one should run. Each call, the new one included, delivers its own outcome exactly once.
    public func retry() -> RequestHandle {
        restart(lifetime)
    }
}
