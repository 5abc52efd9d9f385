public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A port bound on 127.0.0.1 but not listening, so that connecting to it is refused, for the
/// duration of `body`.
public func withRefusingPort<T>(_ body: (Int) async throws -> T) async throws -> T {
    let (socket, address) = try loopbackSocket(listening: false)
    defer { close(socket) }
    return try await body(Int(UInt16(bigEndian: address.sin_port)))
}

/// A TCP socket bound to an ephemeral port on 127.0.0.1 (listening with a backlog of 0 when
/// `listening`), and its address.
public func loopbackSocket(listening: Bool) throws -> (Int32, sockaddr_in) {
    let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
            bind(socket, raw, length) == 0 && (!listening || listen(socket, 0) == 0)
                && getsockname(socket, raw, &length) == 0
        }
    }
    guard bound else {
        close(socket)
        throw POSIXError(.EADDRINUSE)
    }
    return (socket, address)
}
