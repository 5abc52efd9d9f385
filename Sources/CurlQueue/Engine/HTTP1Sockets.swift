/// The sockets of the HTTP/1 connections libcurl kept after a response, found by the ends of
/// the connection. Engine thread only.
///
/// Before a request goes out on a reused HTTP/1 connection, the prerequest callback looks at
/// its socket: bytes waiting there belong to no response of ours (a server sent more than its
/// `Content-Length`), and libcurl 7.88 would read them as the answer to that request. libcurl
/// gives that callback the connection's addresses and ports, not its socket
/// (`CURLINFO_ACTIVESOCKET` is only set once a transfer is done), so the engine notes each
/// HTTP/1 connection's socket when a response on it completes, which is before any reuse.
///
/// An entry may outlive its connection: a later connection with the same ends replaces it,
/// and one socket number is under one key at a time, so the table never holds more entries
/// than there are socket numbers. A stale entry only makes the callback look at (never read
/// from) another socket: at worst a request runs on a new connection it did not need.
struct HTTP1Sockets {
    struct Key: Hashable {
        var localPort: Int32
        var peerPort: Int32
        /// FNV-1a of the peer's address as libcurl prints it.
        var peerAddress: UInt64

        init(localPort: Int, peerPort: Int, peerAddress: UnsafePointer<CChar>?) {
            self.localPort = Int32(truncatingIfNeeded: localPort)
            self.peerPort = Int32(truncatingIfNeeded: peerPort)
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            if var byte = peerAddress {
                while byte.pointee != 0 {
                    hash = (hash ^ UInt64(UInt8(bitPattern: byte.pointee))) &* 0x100_0000_01b3
                    byte += 1
                }
            }
            self.peerAddress = hash
        }
    }

    private var socketByKey: [Key: Int32] = [:]
    private var keyBySocket: [Int32: Key] = [:]

    mutating func record(_ socket: Int32, for key: Key) {
        if let old = keyBySocket[socket] {
            if old == key { return }
            socketByKey[old] = nil
        }
        if let previous = socketByKey[key] { keyBySocket[previous] = nil }
        socketByKey[key] = socket
        keyBySocket[socket] = key
    }

    func socket(for key: Key) -> Int32? {
        socketByKey[key]
    }
}
