import CurlQueue
import CurlQueueOpenAPI
import CurlQueueTestSupport
import Foundation
import OpenAPIFixtureClient
import OpenAPIRuntime
import Testing

/// Every operation of the fixture document through the generated client on CurlQueueTransport.
@Suite struct OpenAPIOperationsTests {
    @Test func pathQueryAndHeaderParametersReachTheServer() async throws {
        let fixture = try await OpenAPIFixture.start()
        let response = try await fixture.client.getItem(
            path: .init(itemID: 42), query: .init(verbose: true), headers: .init(xRequestTag: "blue"))
        let item = try response.ok.body.json
        #expect(item.id == 42)
        #expect(item.name == "item 42")
        #expect(item.tag == "blue")
        #expect(item.verbose == true)
        try await fixture.server.shutdown()
    }

    @Test func anErrorStatusIsTheDocumentedResponse() async throws {
        let fixture = try await OpenAPIFixture.start()
        let response = try await fixture.client.getItem(path: .init(itemID: 1234))
        guard case .notFound(let notFound) = response else {
            Issue.record("expected 404, got \(response)")
            return
        }
        #expect(try notFound.body.json.message == "no item 1234")
        try await fixture.server.shutdown()
    }

    @Test func aJSONBodyIsSentAndAnswered() async throws {
        let fixture = try await OpenAPIFixture.start()
        let response = try await fixture.client.createItem(body: .json(.init(name: "teapot")))
        let item = try response.created.body.json
        #expect(item.id == 1)
        #expect(item.name == "teapot")
        try await fixture.server.shutdown()
    }

    @Test func aBinaryBodyIsSentWhole() async throws {
        // 6 MiB made chunk by chunk, of unknown length: streamed, chunked.
        let fixture = try await OpenAPIFixture.start()
        let chunkSize = 64 * 1024
        let chunks = 96
        let response = try await fixture.client.uploadBlob(
            path: .init(name: "six"), body: .binary(streamedBody(chunks: chunks, chunkSize: chunkSize)))
        let receipt = try response.ok.body.json
        let expected = FixtureServer.expectedBytes(count: chunks * chunkSize)
        #expect(receipt.bytes == Int64(expected.count))
        #expect(receipt.checksum == expected.reduce(Int64(0)) { $0 + Int64($1) })
        #expect(fixture.server.snapshot.uploads["six"]?.mismatchAt == nil)
        try await fixture.server.shutdown()
    }

    @Test func aLargeDownloadArrivesWholeAndInOrder() async throws {
        let fixture = try await OpenAPIFixture.start()
        let size = 32 << 20
        let response = try await fixture.client.download(query: .init(size: Int64(size)))
        let body = try response.ok.body.binary
        #expect(body.length == .known(Int64(size)))
        let expected = FixtureServer.expectedBytes(count: size)
        var received = 0
        var mismatch: Int?
        for try await chunk in body {
            // memcmp: fast in debug and under the sanitizers too.
            let equal = received + chunk.count <= size && chunk.withUnsafeBytes { got in
                expected.withUnsafeBytes { memcmp(got.baseAddress!, $0.baseAddress! + received, got.count) == 0 }
            }
            if mismatch == nil, !equal { mismatch = received }
            received += chunk.count
        }
        #expect(received == size)
        #expect(mismatch == nil)
        try await fixture.server.shutdown()
    }
}
