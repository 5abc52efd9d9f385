public import CurlQueueDurable
import Foundation
import Testing

/// What every store does with text that holds a NUL character (docs/durable.md, "NUL
/// characters"), written once and run by each store's own test file. Never a text cut at the
/// NUL: the job's JSON (metadata, credential, idempotency key) round-trips; a kind, key or queue
/// name with one is refused at enqueue and nothing is stored; an outcome's reason is kept
/// exactly in `outcome`, and in `lastError` as the store can (`lastError`).
public enum StoreNULText {
    /// A job of queue `nul` whose JSON holds NUL characters.
    static func spec(_ name: String) -> JobSpec {
        JobSpec(kind: "download", request: JobRequest(url: "http://127.0.0.1:9/\(name)", destination: name),
                idempotencyKey: "idem\0potent", credential: "vault\0name",
                metadata: ["note": "before\0after", "key\0with": "nul", "end": "\0"])
    }

    /// The job's JSON round-trips through the store, read back through another handle.
    public static func jobJSONRoundTrips(_ open: @Sendable () async throws -> any JobStore) async throws {
        let store = try await open()
        let written = spec("metadata.bin")
        let results = try await store.enqueue([written], queue: "nul", order: .fifo)
        guard case .inserted(let id, _) = try #require(results.first) else {
            Issue.record("not inserted: \(results)")
            return
        }
        let record = try #require(try await open().jobs(JobFilter(ids: [id])).first)
        #expect(record.spec.metadata == written.metadata)
        #expect(record.spec.metadata["note"]?.utf8.count == "before\0after".utf8.count, "the note was cut at its NUL")
        #expect(record.spec.credential == "vault\0name")
        #expect(record.spec.idempotencyKey == "idem\0potent")
        #expect(record.spec == written)
    }

    /// A kind, key or queue name with a NUL, a destination or a header value with one: each
    /// refused at enqueue with `JobSpecError`, in a batch with a good job, and nothing stored.
    public static func refusedFieldsStoreNothing(_ open: @Sendable () async throws -> any JobStore) async throws {
        let store = try await open()
        let good = spec("good.bin")
        var kind = spec("kind.bin")
        kind.kind = "down\0load"
        var key = spec("key.bin")
        key.key = "the\0key"
        var destination = spec("destination.bin")
        destination.request.destination = "a\0b.bin"
        var header = spec("header.bin")
        header.request.headerFields = [.init("X-Note", "a\0b")]
        let refusals: [(JobSpec, String, JobSpecError)] = [
            (kind, "nul", .nulCharacter("kind")), (key, "nul", .nulCharacter("key")), (good, "n\0ul", .nulCharacter("queue name")),
            (destination, "nul", .badDestination("a\0b.bin")), (header, "nul", .badHeaderField("X-Note")),
        ]
        for (refused, queue, expected) in refusals {
            let error = await #expect(throws: JobSpecError.self) {
                _ = try await store.enqueue([good, refused], queue: queue, order: .fifo)
            }
            #expect(error == expected)
        }
        #expect(try await open().counts(queue: nil).isEmpty, "a refused batch stored something")
    }

    /// A failure's reason with a NUL: `outcome` keeps it exactly, `lastError` is `lastError`.
    public static func reasonIsKept(_ open: @Sendable () async throws -> any JobStore, lastError: String) async throws {
        let store = try await open()
        let worker = WorkerInfo(node: WorkerInfo.localNode, pid: getpid())
        try await store.register(worker)
        _ = try await store.enqueue([spec("reason.bin")], queue: "nul", order: .fifo)
        let claimed = try #require(try await store.claim(queue: "nul", kinds: ["download"], limit: 1, worker: worker.id).first)
        let reason = "bad\0byte"
        #expect(try await store.finish(claimed.lease, .failed(reason: reason)))
        let record = try #require(try await open().jobs(JobFilter(ids: [claimed.lease.job])).first)
        #expect(record.outcome == .failed(reason: reason))
        #expect(record.lastError == lastError)
    }
}
