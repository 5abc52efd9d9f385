import CurlQueue
import CurlQueueOpenAPI
import CurlQueueTestSupport
import Foundation
import OpenAPIFixtureClient
import OpenAPIRuntime

/// A fixture server and a generated client on a ``CurlQueueTransport``, for one test.
struct OpenAPIFixture {
    let server: OpenAPIFixtureServer
    let client: Client
    let transport: CurlQueueTransport

    static func start(configuration: CurlQueueTransport.Configuration = .init(),
                      middlewares: [any ClientMiddleware] = []) async throws -> OpenAPIFixture {
        let server = try await OpenAPIFixtureServer.start()
        let transport = CurlQueueTransport(maxConcurrentRequestCount: 8, configuration: configuration)
        let client = Client(serverURL: server.baseURL, transport: transport, middlewares: middlewares)
        return OpenAPIFixture(server: server, client: client, transport: transport)
    }
}

/// A request body made of `count` chunks of `chunkSize` pattern bytes, each made when it is asked
/// for, iterable once (as a body streamed from elsewhere would be).
func streamedBody(chunks count: Int, chunkSize: Int) -> HTTPBody {
    HTTPBody(PatternChunks(count: count, chunkSize: chunkSize), length: .unknown, iterationBehavior: .single)
}

struct PatternChunks: AsyncSequence, Sendable {
    typealias Element = ArraySlice<UInt8>
    let count: Int
    let chunkSize: Int

    func makeAsyncIterator() -> Iterator { Iterator(count: count, chunkSize: chunkSize) }

    struct Iterator: AsyncIteratorProtocol {
        let count: Int
        let chunkSize: Int
        var index = 0

        mutating func next() async throws -> ArraySlice<UInt8>? {
            guard index < count else { return nil }
            defer { index += 1 }
            return ArraySlice(FixtureServer.expectedBytes(offset: index * chunkSize, count: chunkSize))
        }
    }
}
