#if canImport(Glibc)
@testable import CurlQueue
import CurlQueueTestHelpers
import Glibc
import Testing

/// The engine tells glibc's allocator, once, that blocks the size of its receive buffers are
/// allocated and freed over and over (`CurlEngine.prepareAllocator()`): such blocks then come
/// from the heap, not from a mapping of their own, and the heap keeps the memory they free
/// instead of handing it back to the system after every transfer.
///
/// The figure it is for (page faults and CPU time per small GET) is a benchmark's; this checks
/// the state the engine leaves glibc in. It fails when run on its own without the preparation;
/// in a full run another test that freed a bigger mapped block first may have raised the
/// thresholds already. Under a sanitizer, whose allocator reports the size asked for, it
/// cannot tell either way.
@Suite struct AllocatorPreparationTests {
    @Test func aBlockAsLargeAsTheLargestReceiveBufferComesFromTheHeapOnceTheEngineExists() {
        _ = CurlEngine.shared
        let size = Attempt.fileReceiveBufferSize + 1
        let block = malloc(size)
        defer { free(block) }
        // A heap block has 7 to 22 bytes more than asked for; a mapped one is page-rounded
        // (4,079 bytes more at this size).
        #expect(usableSize(block) - size < 64)
    }

    /// glibc's `malloc_usable_size`, which its Swift module leaves out (it is in `malloc.h`).
    func usableSize(_ block: UnsafeMutableRawPointer?) -> Int {
        typealias UsableSize = @convention(c) (UnsafeMutableRawPointer?) -> Int
        let symbol = dlsym(nil, "malloc_usable_size")
        #expect(symbol != nil)
        guard let symbol else { return 0 }
        return unsafeBitCast(symbol, to: UsableSize.self)(block)
    }
}
#endif
