@testable import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// A streamed request body that fails: a sequence that throws, or one whose bytes do not match
/// its announced length, fails the transfer with that said.
@Suite struct StreamedUploadFailureTests {
    struct ProducerBroke: Error, CustomStringConvertible {
        var description: String { "the producer broke" }
    }

    func request(_ server: OpenAPIFixtureServer, _ name: String, _ body: RequestBodyStream) -> Request {
        Request(url: server.baseURL.appendingPathComponent("blobs/\(name)"), method: .put, body: .stream(body))
    }

    @Test func aThrowingProducerFailsTheTransferWithItsError() async throws {
        let server = try await OpenAPIFixtureServer.start()
        let body = RequestBodyStream(PatternUpload(total: 1 << 20, chunkSize: 64 << 10) { index in
            guard index == 3 else { return }
            // Once the server has the first three chunks: the failure comes mid-transfer.
            try await server.waitUntil(timeout: .seconds(20)) { ($0.uploads["broke"]?.bytes ?? 0) >= 3 * 64 << 10 }
            throw ProducerBroke()
        })
        let result = await completion(of: RequestOperation(request: request(server, "broke", body)))
        guard case .failure(.transport(let failure)) = result else {
            Issue.record("expected a transport failure, got \(result)")
            return
        }
        #expect(failure.code == .readError)
        #expect(failure.message.contains("the producer broke"))
        #expect(body.producerError is ProducerBroke)
        try await server.waitUntil { $0.uploads["broke"]?.closedEarly == true }
        #expect(server.snapshot.uploads["broke"]?.complete == false)
        try await server.shutdown()
    }

    @Test func aBodyShorterThanItsLengthFails() async throws {
        let server = try await OpenAPIFixtureServer.start()
        let body = RequestBodyStream(length: 200_000, PatternUpload(total: 150_000, chunkSize: 50_000))
        let result = await completion(of: RequestOperation(request: request(server, "short", body)))
        guard case .failure(.invalidRequest(let reason)) = result else {
            Issue.record("expected an invalid request, got \(result)")
            return
        }
        #expect(reason.contains("ended after 150000 bytes"))
        try await server.shutdown()
    }
}
