import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// SHA-256 (FIPS 180-4), small and dependency-free, fed incrementally so that a file of any
/// size is hashed in constant memory. Checked against the standard test vectors in the tests.
package struct SHA256 {
    private var state: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32) =
        (0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19)
    private var pending: [UInt8] = []
    private var length: UInt64 = 0
    /// The message schedule, reused for every block.
    private let schedule = Schedule()

    /// 64 words of scratch space, allocated once per hasher. Rewritten whole for every block,
    /// so copies of a hasher may share it, though not from two threads at once.
    private final class Schedule {
        let words = UnsafeMutablePointer<UInt32>.allocate(capacity: 64)
        deinit { words.deallocate() }
    }

    /// The round constants, in memory that lives as long as the process.
    nonisolated(unsafe) private static let constants: UnsafePointer<UInt32> = {  // safe: never written after this
        let pointer = UnsafeMutablePointer<UInt32>.allocate(capacity: 64)
        pointer.initialize(from: k, count: 64)
        return UnsafePointer(pointer)
    }()

    private static let k: [UInt32] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
    ]

    package init() { pending.reserveCapacity(64) }

    package mutating func update(_ bytes: UnsafeRawBufferPointer) {
        length &+= UInt64(bytes.count)
        var offset = 0
        if !pending.isEmpty {
            let take = min(64 - pending.count, bytes.count)
            pending.append(contentsOf: bytes[0..<take])
            offset = take
            if pending.count == 64 {
                pending.withUnsafeBytes { compress($0.baseAddress!) }
                pending.removeAll(keepingCapacity: true)
            }
        }
        while bytes.count - offset >= 64 {
            compress(bytes.baseAddress! + offset)
            offset += 64
        }
        if offset < bytes.count { pending.append(contentsOf: bytes[offset...]) }
    }

    package mutating func update<Bytes: Sequence<UInt8>>(_ bytes: Bytes) {
        let array = Array(bytes)
        array.withUnsafeBytes { update($0) }
    }

    /// The digest as 64 lowercase hexadecimal digits.
    package mutating func finalize() -> String {
        let bitLength = length &* 8
        var tail: [UInt8] = [0x80]
        let used = (pending.count + 1) % 64
        tail += [UInt8](repeating: 0, count: used <= 56 ? 56 - used : 120 - used)
        for shift in stride(from: 56, through: 0, by: -8) { tail.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift))) }
        let savedLength = length
        tail.withUnsafeBytes { update($0) }
        length = savedLength
        precondition(pending.isEmpty)
        let words = [state.0, state.1, state.2, state.3, state.4, state.5, state.6, state.7]
        return words.map { word in
            let hex = String(word, radix: 16)
            return String(repeating: "0", count: 8 - hex.count) + hex
        }.joined()
    }

    /// One 64-byte block. Written with raw pointers and no helper calls, so that it is not
    /// painfully slow in debug builds too (where every call and bounds check stays).
    private mutating func compress(_ block: UnsafeRawPointer) {
        let w = schedule.words
        let k = Self.constants
        var i = 0
        while i < 16 {
            let b = block.advanced(by: i &* 4).assumingMemoryBound(to: UInt8.self)
            w[i] = UInt32(b[0]) << 24 | UInt32(b[1]) << 16 | UInt32(b[2]) << 8 | UInt32(b[3])
            i &+= 1
        }
        while i < 64 {
            let x = w[i &- 15]
            let y = w[i &- 2]
            let s0 = (x >> 7 | x << 25) ^ (x >> 18 | x << 14) ^ (x >> 3)
            let s1 = (y >> 17 | y << 15) ^ (y >> 19 | y << 13) ^ (y >> 10)
            w[i] = w[i &- 16] &+ s0 &+ w[i &- 7] &+ s1
            i &+= 1
        }
        var (a, b, c, d, e, f, g, h) = state
        i = 0
        while i < 64 {
            let s1 = (e >> 6 | e << 26) ^ (e >> 11 | e << 21) ^ (e >> 25 | e << 7)
            let t1 = h &+ s1 &+ ((e & f) ^ (~e & g)) &+ k[i] &+ w[i]
            let s0 = (a >> 2 | a << 30) ^ (a >> 13 | a << 19) ^ (a >> 22 | a << 10)
            let t2 = s0 &+ ((a & b) ^ (a & c) ^ (b & c))
            h = g; g = f; f = e; e = d &+ t1
            d = c; c = b; b = a; a = t1 &+ t2
            i &+= 1
        }
        state = (state.0 &+ a, state.1 &+ b, state.2 &+ c, state.3 &+ d,
                 state.4 &+ e, state.5 &+ f, state.6 &+ g, state.7 &+ h)
    }

    /// The digest of `bytes`.
    package static func hex<Bytes: Sequence<UInt8>>(of bytes: Bytes) -> String {
        var hasher = SHA256()
        hasher.update(bytes)
        return hasher.finalize()
    }

    package enum FileError: Error, Equatable {
        /// `shouldStop` said to stop.
        case stopped
        case unreadable(String)
    }

    /// The digest of the file at `path`, read 256 KiB at a time. `shouldStop` is asked
    /// between reads, so that a large file can be abandoned (on Ctrl-C).
    package static func hex(ofFileAt path: String, shouldStop: () -> Bool = { false }) throws(FileError) -> String {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .unreadable("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 16)
        defer { buffer.deallocate() }
        var hasher = SHA256()
        while true {
            if shouldStop() { throw .stopped }
            let count = read(descriptor, buffer.baseAddress, buffer.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw .unreadable("cannot read \(path): \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            hasher.update(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
        }
        return hasher.finalize()
    }
}
