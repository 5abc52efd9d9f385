package import NIOCore

/// The deterministic byte pattern that `/bytes` (and `/flaky?bytes=`) serve, in the demo server
/// and in the test fixture.
///
/// Byte `i` of every body is `Pattern.byte(at: i)`, a fixed function of `i % 65521`. The period is a
/// prime, so it never lines up with power-of-two chunk, buffer or range sizes, and the function is
/// not a plain counter, so a body shifted by one byte (an off-by-one range or resume bug) no longer
/// matches.
package enum Pattern {
    /// The period of the pattern (the largest prime below 2^16).
    static let period = 65521

    /// Longest slice that ``slice(offset:count:)`` hands out without copying.
    static let maxSharedSliceLength = 1 << 20

    /// The value of byte `index` of every pattern body.
    @inline(__always)
    static func byte(at index: Int) -> UInt8 {
        let k = index % period
        return UInt8(truncatingIfNeeded: k &* 167 &+ (k >> 8) &+ 13)
    }

    /// One period of the pattern.
    static let periodBytes: [UInt8] = (0..<period).map { byte(at: $0) }

    /// The pattern from offset 0, long enough (`period + maxSharedSliceLength`) that every slice of
    /// up to `maxSharedSliceLength` bytes starting at any phase of the period is a contiguous range
    /// of it. Computed once; slices of it share its storage, so serving a body copies nothing.
    static let buffer: ByteBuffer = {
        let length = period + maxSharedSliceLength
        var buffer = ByteBufferAllocator().buffer(capacity: length)
        while buffer.readableBytes < length {
            let count = min(period, length - buffer.readableBytes)
            buffer.writeBytes(periodBytes[0..<count])
        }
        return buffer
    }()

    /// `count` pattern bytes starting at body offset `offset`.
    ///
    /// Up to ``maxSharedSliceLength`` bytes this is a zero-copy slice of ``buffer``; longer
    /// requests (only possible through an explicit large `chunk=`) are assembled from such slices.
    package static func slice(offset: Int, count: Int) -> ByteBuffer {
        precondition(offset >= 0 && count >= 0, "negative pattern offset or count")
        let phase = offset % period
        if count <= maxSharedSliceLength {
            return buffer.getSlice(at: buffer.readerIndex + phase, length: count)!
        }
        var result = ByteBufferAllocator().buffer(capacity: count)
        var position = offset
        while result.readableBytes < count {
            var piece = slice(offset: position, count: min(maxSharedSliceLength, count - result.readableBytes))
            position += piece.readableBytes
            result.writeBuffer(&piece)
        }
        return result
    }

    /// `count` pattern bytes starting at body offset `offset`, as an array.
    package static func bytes(offset: Int, count: Int) -> [UInt8] {
        precondition(offset >= 0 && count >= 0, "negative pattern offset or count")
        var result = [UInt8]()
        result.reserveCapacity(count)
        var phase = offset % period
        var remaining = count
        while remaining > 0 {
            let run = min(remaining, period - phase)
            result.append(contentsOf: periodBytes[phase..<(phase + run)])
            remaining -= run
            phase = 0
        }
        return result
    }
}
