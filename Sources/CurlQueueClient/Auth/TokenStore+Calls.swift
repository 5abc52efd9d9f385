import Dispatch

/// How an authenticator calls its ``TokenStore`` from a task: on a Dispatch thread, since a
/// store may write and `fsync` a file (``FileTokenStore``), which must not hold one of the
/// Swift concurrency pool's few threads. A token is saved once per refresh: the hop is cheap.
enum TokenStoreCalls {
    static let queue = DispatchQueue(label: "CurlQueueClient.TokenStore", qos: .utility)

    /// Runs `call` on ``queue`` (one at a time, in order) and returns once it has.
    static func run(_ call: @escaping @Sendable () -> Void) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                call()
                continuation.resume()
            }
        }
    }
}
