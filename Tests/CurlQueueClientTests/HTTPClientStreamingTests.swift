import CurlQueue
import CurlQueueClient
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import HTTPTypes
import Testing

/// Streamed responses through the client: chunks as the server releases them, through the
/// middleware stack, in both the async and the closure form, and cancellation.
@Suite struct HTTPClientStreamingTests {
    func line(_ index: Int) -> Data { Data("{\"n\":\(index)}\n".utf8) }

    @Test func chunksArriveAsTheServerReleasesThemThroughTheMiddleware() async throws {
        try await withServer { server in
            let seen = LockedBox<[Int]>([])
            let client = makeClient(server, middleware: [Observer(statuses: seen)])
            let response = try await client.stream(.get, "lines", query: [.init(name: "count", value: "4"), .init(name: "gate", value: "cs")])
            #expect(response.status == .ok)
            // The middleware saw the head (status 200, empty body) before any line was released.
            #expect(seen.value == [200])
            var chunks = response.body.makeAsyncIterator()
            for index in 0..<4 {
                server.openGate("cs-\(index)")
                // Line index + 1 is not released yet: this chunk is line `index`, whole.
                #expect(try await chunks.next() == line(index))
            }
            #expect(try await chunks.next() == nil)
        }
    }

    struct Feed: APIRequest {
        typealias Output = Response
        var path: String { "lines" }
        var query: [URLQueryItem]
    }

    @Test func theClosureFormDeliversHeadChunksThenOneOutcomeOnTheCallbackQueue() async throws {
        try await withServer { server in
            enum Event: Equatable, Sendable { case start, head(Int), chunk(Data), success, error }
            let (events, sink) = AsyncStream<Event>.makeStream()
            let callbackQueue = DispatchQueue(label: "streaming-test")
            let client = makeClient(server) { $0.callbackQueue = callbackQueue }
            let onQueue = LockedBox(true)
            let check: @Sendable () -> Void = { if DispatchQueue.getSpecific(key: streamingKey) == nil { onQueue.update { $0 = false } } }
            callbackQueue.setSpecific(key: streamingKey, value: ())
            let handle = client.stream(
                Feed(query: [.init(name: "count", value: "3"), .init(name: "gate", value: "cl")]),
                onStart: { check(); sink.yield(.start) },
                onHead: { check(); sink.yield(.head($0.status.code)) },
                onChunk: { check(); sink.yield(.chunk($0)) },
                onSuccess: { check(); sink.yield(.success); sink.finish() },
                onError: { _ in sink.yield(.error); sink.finish() })
            var iterator = events.makeAsyncIterator()
            #expect(await iterator.next() == .start)
            #expect(await iterator.next() == .head(200))
            for index in 0..<3 {
                server.openGate("cl-\(index)")
                #expect(await iterator.next() == .chunk(line(index)))
            }
            #expect(await iterator.next() == .success)
            #expect(await iterator.next() == nil)
            #expect(handle.isFinished)
            #expect(onQueue.value)
        }
    }

    @Test func leavingTheLoopEarlyClosesTheConnection() async throws {
        try await withServer { server in
            let client = makeClient(server)
            let response = try await client.stream(.get, "lines", query: [.init(name: "heartbeat", value: "1"), .init(name: "id", value: "early")])
            for try await chunk in response.body {
                #expect(chunk.starts(with: Data("{\"n\":0}".utf8)))
                break
            }
            await server.waitUntilClosed("early")
        }
    }

    @Test func aFailureMidwayEndsTheStreamWithTheTransportError() async throws {
        try await withServer { server in
            let client = makeClient(server)
            let response = try await client.stream(.get, "lines", query: [.init(name: "count", value: "3"), .init(name: "thenClose", value: "1")])
            var received: [Data] = []
            do throws(RequestError) {
                var chunks = response.body.makeAsyncIterator()
                while let chunk = try await chunks.next() { received.append(chunk) }
                Issue.record("the stream must fail")
            } catch {
                #expect(error.transportFailure?.code == .partialFile)
            }
            #expect(received.reduce(Data(), +) == line(0) + line(1) + line(2))
        }
    }
}

private let streamingKey = DispatchSpecificKey<Void>()

/// Records the status of each response that passes on its way back.
private struct Observer: HTTPClientMiddleware {
    let statuses: LockedBox<[Int]>

    func intercept(_ request: Request, next: (Request) async throws -> Response) async throws -> Response {
        let response = try await next(request)
        statuses.update { $0.append(response.status.code) }
        #expect(response.body.isEmpty)
        return response
    }
}
