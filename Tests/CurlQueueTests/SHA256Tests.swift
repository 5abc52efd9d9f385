@testable import CurlQueue
import CurlQueueTestHelpers
import Foundation
import Testing

/// The SHA-256 that checks downloads (`curlq`'s `sha256=`) and names disk cache entries.
@Suite struct SHA256Tests {
    @Test func sha256KnownVectors() {
        #expect(SHA256.hex(of: [UInt8]()) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hex(of: Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.hex(of: Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(SHA256.hex(of: Array("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu".utf8))
                == "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1")
        #expect(SHA256.hex(of: [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000))
                == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test func sha256IsTheSameWhateverTheChunks() throws {
        let bytes = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let whole = SHA256.hex(of: bytes)
        for size in [1, 3, 55, 56, 63, 64, 65, 127, 1000] {
            var hasher = SHA256()
            var offset = 0
            while offset < bytes.count {
                hasher.update(bytes[offset..<min(offset + size, bytes.count)])
                offset += size
            }
            #expect(hasher.finalize() == whole, "in chunks of \(size)")
        }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("curlq-sha-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data(bytes).write(to: file)
        #expect(try SHA256.hex(ofFileAt: file.path) == whole)
        #expect(throws: SHA256.FileError.stopped) { try SHA256.hex(ofFileAt: file.path) { true } }
        #expect(throws: SHA256.FileError.self) { try SHA256.hex(ofFileAt: file.path + "-missing") }
    }
}
