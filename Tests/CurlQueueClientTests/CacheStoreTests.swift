import CurlQueue
@testable import CurlQueueClient
import CurlQueueTestHelpers
import Foundation
import HTTPTypes
import Testing

/// The two response cache stores: what they keep, what they drop, and what a damaged disk
/// entry gives.
@Suite struct CacheStoreTests {
    func response(_ body: String, status: HTTPResponse.Status = .ok) -> CachedResponse {
        var fields = HTTPFields()
        fields[.eTag] = "\"\(body.count)\""
        fields[.cacheControl] = "max-age=60"
        return CachedResponse(status: status, headerFields: fields, body: Data(body.utf8),
                              requestedAt: Date(timeIntervalSince1970: 1_700_000_000),
                              receivedAt: Date(timeIntervalSince1970: 1_700_000_001),
                              varyingRequestFields: ["accept": "application/json"], timeToLive: .milliseconds(1500))
    }

    func temporaryFolder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("cq-cache-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    /// The files in a disk store's folder, less the one that holds its partition secret.
    func entryFiles(_ folder: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0 != DiskCacheStore.partitionSecretFileName }
    }

    @Test func memoryStoreEvictsTheLeastRecentlyUsedPastItsLimit() {
        let one = response(String(repeating: "a", count: 1000))
        let store = MemoryCacheStore(byteLimit: 3 * (one.byteCost + 10))
        store.store(one, forKey: "k1")
        store.store(response(String(repeating: "b", count: 1000)), forKey: "k2")
        store.store(response(String(repeating: "c", count: 1000)), forKey: "k3")
        #expect(store.count == 3)
        _ = store.cachedResponse(forKey: "k1")  // k2 is now the least recently used
        store.store(response(String(repeating: "d", count: 1000)), forKey: "k4")
        #expect(store.cachedResponse(forKey: "k2") == nil)
        #expect(store.cachedResponse(forKey: "k1") == one)
        #expect(store.cachedResponse(forKey: "k3") != nil)
        #expect(store.cachedResponse(forKey: "k4") != nil)
        #expect(store.byteCount <= store.byteLimit)
    }

    @Test func memoryStoreReplacesRemovesAndRefusesWhatCannotFit() {
        let store = MemoryCacheStore(byteLimit: 4000)
        store.store(response("old"), forKey: "k")
        store.store(response("new"), forKey: "k")
        #expect(store.count == 1)
        #expect(store.cachedResponse(forKey: "k")?.body == Data("new".utf8))
        store.store(response(String(repeating: "x", count: 5000)), forKey: "big")
        #expect(store.cachedResponse(forKey: "big") == nil)
        #expect(store.cachedResponse(forKey: "k") != nil)  // refusing the big one evicted nothing
        store.removeCachedResponse(forKey: "k")
        #expect(store.count == 0 && store.byteCount == 0)
        store.store(response("again"), forKey: "k")
        store.removeAll()
        #expect(store.cachedResponse(forKey: "k") == nil)
    }

    @Test func memoryStoreKeepsItsBookkeepingUnderRandomUse() {
        var generator = SystemRandomNumberGenerator()
        let store = MemoryCacheStore(byteLimit: 20_000)
        var model: [String: CachedResponse] = [:]
        for _ in 0..<5000 {
            let key = "k\(Int.random(in: 0..<40, using: &generator))"
            switch Int.random(in: 0..<4, using: &generator) {
            case 0, 1:
                let value = response(String(repeating: "v", count: Int.random(in: 0..<3000, using: &generator)))
                store.store(value, forKey: key)
                model[key] = value
            case 2:
                store.removeCachedResponse(forKey: key)
                model[key] = nil
            default:
                // Whatever the store still has must be what was stored last under that key.
                if let found = store.cachedResponse(forKey: key) { #expect(found == model[key]) }
            }
            #expect(store.byteCount <= 20_000)
        }
    }

    @Test func diskStoreRoundTripsEveryPartOfAnEntryAcrossInstances() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let stored = response("hello\r\nworld\u{0}")
        try DiskCacheStore(folder: folder).store(stored, forKey: "GET https://example.com/a")
        let reopened = try DiskCacheStore(folder: folder)
        #expect(reopened.count == 1)
        #expect(reopened.cachedResponse(forKey: "GET https://example.com/a") == stored)
        #expect(reopened.cachedResponse(forKey: "GET https://example.com/b") == nil)
        // Files are the owner's only.
        let name = try #require(try entryFiles(folder).first)
        let attributes = try FileManager.default.attributesOfItem(atPath: folder.appendingPathComponent(name).path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
    }

    @Test func aDamagedOrTruncatedDiskEntryIsAMissAndIsRemoved() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try DiskCacheStore(folder: folder)
        let key = "GET https://example.com/x"
        let path = folder.appendingPathComponent(DiskCacheStore.fileName(for: key)).path
        store.store(response(String(repeating: "z", count: 10_000)), forKey: key)
        let good = try Data(contentsOf: URL(fileURLWithPath: path))
        var damages: [Data] = [
            Data(), good.prefix(5), good.prefix(good.count - 1), good + Data([0]),
            Data("CQCACHE1\n{\"key\":1}\nbody".utf8),
        ]
        var flipped = good
        flipped[flipped.count - 100] ^= 0x01  // one bit of the body
        damages.append(flipped)
        var header = good
        header[20] ^= 0x20  // a byte of the digest
        damages.append(header)
        // A change that leaves the metadata valid JSON, with a different meaning.
        let text = String(decoding: good, as: UTF8.self)
        #expect(text.contains("max-age=60"))
        damages.append(Data(text.replacingOccurrences(of: "max-age=60", with: "max-age=99").utf8))
        for _ in 0..<200 {
            var random = good
            for _ in 0..<Int.random(in: 1...8) { random[Int.random(in: 0..<random.count)] = UInt8.random(in: 0...255) }
            if random != good { damages.append(random) }
            damages.append(good.prefix(Int.random(in: 0..<good.count)))
        }
        // About 400 files written and read: seconds on a busy disk, so on a thread of its own,
        // not on one of the concurrency pool's two, which every other test needs (offThePool).
        let outcomes = try await offThePool { [damages] in
            try damages.map { damaged -> (missed: Bool, removed: Bool) in
                try damaged.write(to: URL(fileURLWithPath: path))
                return (store.cachedResponse(forKey: key) == nil, !FileManager.default.fileExists(atPath: path))
            }
        }
        for (index, outcome) in outcomes.enumerated() {
            #expect(outcome.missed, "damage \(index)")
            #expect(outcome.removed, "damage \(index)")
        }
    }

    @Test func anotherKeysFileUnderThisKeysNameIsAMiss() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try DiskCacheStore(folder: folder)
        store.store(response("mine"), forKey: "a")
        try FileManager.default.moveItem(atPath: folder.appendingPathComponent(DiskCacheStore.fileName(for: "a")).path,
                                         toPath: folder.appendingPathComponent(DiskCacheStore.fileName(for: "b")).path)
        #expect(store.cachedResponse(forKey: "b") == nil)
    }

    @Test func diskStoreEvictsTheLeastRecentlyUsedAndLeavesNoTemporaryFiles() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        // Leftovers of an interrupted write go when the store opens.
        _ = FileManager.default.createFile(atPath: folder.appendingPathComponent(".tmp-leftover").path, contents: Data("x".utf8))
        let body = String(repeating: "q", count: 10_000)
        let store = try DiskCacheStore(folder: folder, byteLimit: 35_000)
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent(".tmp-leftover").path))
        store.store(response(body), forKey: "1")
        store.store(response(body), forKey: "2")
        store.store(response(body), forKey: "3")
        _ = store.cachedResponse(forKey: "1")
        store.store(response(body), forKey: "4")  // past the limit: "2" was used least recently
        #expect(store.cachedResponse(forKey: "2") == nil)
        #expect(store.cachedResponse(forKey: "1") != nil)
        #expect(store.cachedResponse(forKey: "4") != nil)
        #expect(store.byteCount <= 35_000)
        let names = try entryFiles(folder)
        #expect(names.allSatisfy { $0.hasSuffix(".cache") })
        let onDisk = try names.reduce(Int64(0)) { total, name in
            let size = try FileManager.default.attributesOfItem(atPath: folder.appendingPathComponent(name).path)[.size] as? Int64
            return total + (size ?? 0)
        }
        #expect(onDisk == store.byteCount)
        store.removeAll()
        #expect(try entryFiles(folder).isEmpty)
    }

    @Test func aDiskEntryThatFitsTheLimitButNot90PercentOfItIsKept() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try DiskCacheStore(folder: folder, byteLimit: 20_000)
        store.store(response(String(repeating: "s", count: 1_000)), forKey: "small")
        // 18,500 of 20,000 bytes: it fits the limit, not the 90% eviction aims at. Before, it
        // was written, then evicted with everything else: the store emptied and kept nothing.
        let big = response(String(repeating: "b", count: 18_500))
        store.store(big, forKey: "big")
        #expect(store.cachedResponse(forKey: "big") == big)
        #expect(store.cachedResponse(forKey: "small") == nil)
        #expect(store.count == 1)
        #expect(store.byteCount <= 20_000)
        #expect(try entryFiles(folder).count == 1)
    }

    @Test func hostileKeysStayInsideTheFolder() throws {
        let parent = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: parent) }
        let folder = parent.appendingPathComponent("cache")
        let store = try DiskCacheStore(folder: folder)
        for key in ["../escape", "/etc/passwd", "a/../../b", String(repeating: "k", count: 10_000), "\u{0}\n"] {
            store.store(response("v"), forKey: key)
            #expect(store.cachedResponse(forKey: key)?.body == Data("v".utf8))
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: parent.path) == ["cache"])
        #expect(try entryFiles(folder).count == 5)
    }

    @Test func concurrentUseOfOneDiskStoreNeverReturnsAMixedEntry() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try DiskCacheStore(folder: folder, byteLimit: 1_000_000)
        let bodies = (0..<4).map { String(repeating: Character(UnicodeScalar(UInt8(97 + $0))), count: 20_000 + $0) }
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<4 {
                group.addTask {
                    for round in 0..<50 {
                        store.store(self.response(bodies[(worker + round) % 4]), forKey: "shared")
                        if let found = store.cachedResponse(forKey: "shared") {
                            #expect(bodies.contains(String(decoding: found.body, as: UTF8.self)))
                        }
                    }
                }
            }
        }
        #expect(store.cachedResponse(forKey: "shared") != nil)
    }
}
