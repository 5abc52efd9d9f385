import CurlQueue
import CurlQueueOpenAPI
import CurlQueueTestSupport
import Foundation
import OpenAPIFixtureClient
import OpenAPIRuntime
import Testing

/// The generated client's binary upload streams its body through CurlQueueTransport: seen from
/// the server, the first chunk arrives before the last is made; a cancelled call ends the
/// connection and the body's iteration; a body that throws fails the call with its error.
@Suite struct OpenAPIUploadStreamingTests {
    /// `count` chunks of `chunkSize` pattern bytes; `before(i)` runs before chunk i is made.
    struct HookedChunks: AsyncSequence, Sendable {
        typealias Element = ArraySlice<UInt8>
        let count: Int
        let chunkSize: Int
        let before: @Sendable (Int) async throws -> Void

        func makeAsyncIterator() -> Iterator { Iterator(chunks: self) }

        struct Iterator: AsyncIteratorProtocol {
            let chunks: HookedChunks
            var index = 0

            mutating func next() async throws -> ArraySlice<UInt8>? {
                try await chunks.before(index)
                guard index < chunks.count else { return nil }
                defer { index += 1 }
                return ArraySlice(FixtureServer.expectedBytes(offset: index * chunks.chunkSize, count: chunks.chunkSize))
            }
        }
    }

    struct BodyBroke: Error {}

    @Test(arguments: [false, true])
    func theServerHasTheFirstChunkBeforeTheLastIsMade(knownLength: Bool) async throws {
        let fixture = try await OpenAPIFixture.start()
        let server = fixture.server
        let (chunkSize, count) = (256 << 10, 8)  // 2 MiB: over the 1 MiB read into memory first
        let name = knownLength ? "live-known" : "live"
        let chunks = HookedChunks(count: count, chunkSize: chunkSize) { index in
            guard index == count - 1 else { return }
            try await server.waitUntil(timeout: .seconds(20)) { ($0.uploads[name]?.bytes ?? 0) >= chunkSize }
        }
        let length: HTTPBody.Length = knownLength ? .known(Int64(count * chunkSize)) : .unknown
        let response = try await fixture.client.uploadBlob(
            path: .init(name: name), body: .binary(HTTPBody(chunks, length: length, iterationBehavior: .single)))
        #expect(try response.ok.body.json.bytes == Int64(count * chunkSize))
        let upload = try #require(server.snapshot.uploads[name])
        #expect(upload.mismatchAt == nil)
        #expect(upload.chunked == !knownLength)
        #expect(upload.contentLength == (knownLength ? count * chunkSize : nil))
        try await server.shutdown()
    }

    @Test func cancellingTheCallEndsTheConnectionAndTheBody() async throws {
        let fixture = try await OpenAPIFixture.start()
        let ended = AsyncStream<Void>.makeStream()
        let chunks = HookedChunks(count: 1 << 20, chunkSize: 64 << 10) { index in
            guard index == 4 else { return }
            // Until the call is cancelled: then the iteration ends (the sequence throws).
            let never = AsyncStream<Void> { _ in }
            for await _ in never {}
            ended.continuation.yield()
            throw CancellationError()
        }
        let client = fixture.client
        let call = Task {
            try await client.uploadBlob(path: .init(name: "gone"),
                                        body: .binary(HTTPBody(chunks, length: .unknown, iterationBehavior: .single)))
        }
        try await fixture.server.waitUntil { ($0.uploads["gone"]?.bytes ?? 0) >= 4 * 64 << 10 }
        call.cancel()
        do {
            _ = try await call.value
            Issue.record("the call was not cancelled")
        } catch let error as ClientError {
            #expect(error.underlyingError as? RequestError == .cancelled)
        }
        var iterator = ended.stream.makeAsyncIterator()
        #expect(await iterator.next() != nil)  // the body's iteration ended
        try await fixture.server.waitUntil { $0.uploads["gone"]?.closedEarly == true }
        try await fixture.server.shutdown()
    }

    @Test func aBodyThatThrowsFailsTheCallWithItsError() async throws {
        let fixture = try await OpenAPIFixture.start()
        let server = fixture.server
        let chunks = HookedChunks(count: 64, chunkSize: 64 << 10) { index in
            guard index == 4 else { return }
            try await server.waitUntil(timeout: .seconds(20)) { ($0.uploads["broken"]?.bytes ?? 0) >= 64 << 10 }
            throw BodyBroke()
        }
        do {
            _ = try await fixture.client.uploadBlob(
                path: .init(name: "broken"), body: .binary(HTTPBody(chunks, length: .unknown, iterationBehavior: .single)))
            Issue.record("the call did not fail")
        } catch let error as ClientError {
            #expect(error.underlyingError is BodyBroke)
        }
        try await server.waitUntil { $0.uploads["broken"]?.closedEarly == true }
        try await server.shutdown()
    }
}
