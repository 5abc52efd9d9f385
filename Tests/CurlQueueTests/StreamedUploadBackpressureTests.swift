@testable import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// A streamed request body's producer far ahead of a server that stopped reading is held: the
/// bytes produced and not received stay bounded, and everything arrives once the server reads.
@Suite struct StreamedUploadBackpressureTests {
    /// The most bytes the kernel may hold for one loopback connection: the sender's and the
    /// receiver's socket buffers at their largest (tcp_wmem, tcp_rmem).
    static func kernelBufferBound() -> Int {
        func largest(_ file: String) -> Int {
            let text = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
            return text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).compactMap { Int($0) }.last ?? (8 << 20)
        }
        return largest("/proc/sys/net/ipv4/tcp_wmem") + largest("/proc/sys/net/ipv4/tcp_rmem")
    }

    @Test func aProducerFarAheadOfAStalledServerIsHeld() async throws {
        let server = try await OpenAPIFixtureServer.start()
        let total = 64 << 20
        let record = UploadRecord()
        let body = RequestBodyStream(PatternUpload(total: total, chunkSize: 64 << 10, record: record))
        let url = server.baseURL.appendingPathComponent("blobs/slow")
        var components = URLComponents(url: url, resolvingAgainstBaseURL: false)!
        components.queryItems = [URLQueryItem(name: "holdAfter", value: "\(1 << 20)")]
        let operation = RequestOperation(request: Request(url: components.url!, method: .put, body: .stream(body)))
        let outcome = Task { await completion(of: operation) }

        try await server.waitUntil { $0.uploads["slow"]?.held == true }
        // The producer waits for room (the buffer full, libcurl blocked by the socket's buffers):
        // the next chunk is not asked for.
        #expect(await body.channel.waitUntilProducerWaits())
        let received = try #require(server.snapshot.uploads["slow"]).bytes
        let produced = record.produced
        let bound = UploadChannel.defaultLimit + 64 << 10 + Self.kernelBufferBound()
        #expect(produced < total, "the producer was not held")
        #expect(produced - received <= bound, "\(produced - received) bytes produced and not received, over \(bound)")
        #expect(body.channel.highWaterBytes <= UploadChannel.defaultLimit)

        server.openGate("slow-hold")
        let response = try await outcome.value.get()
        #expect(response.status == .ok)
        let upload = try #require(server.snapshot.uploads["slow"])
        #expect(upload.bytes == total)
        #expect(upload.mismatchAt == nil)
        #expect(body.channel.highWaterBytes <= UploadChannel.defaultLimit)
        #expect(body.channel.producerWaitCount > 0)
        try await server.shutdown()
    }
}
