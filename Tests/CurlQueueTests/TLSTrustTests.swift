import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// The one way to switch certificate verification off, and what it still checks.
@Suite(.serialized) struct TLSTrustTests {
    @Test func theInsecureOptionAcceptsAnUntrustedCertificateButStillChecksAPin() async throws {
        let server = try await NginxServer.start()
        defer { server.shutdown() }
        var request = Request(url: server.url("/files/1k"))
        // Without the option this certificate fails (TLSTests.anUntrustedCertificateFailsClosed).
        request.tls.insecureSkipsVerificationForLocalTestingOnly = true
        let response = try await RequestOperation(request: request).response()
        #expect(response.status == .ok)
        #expect(response.bodyBytes == FixtureServer.expectedBytes(count: 1024))

        request.tls.pinnedPublicKey = "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
        let pinned = await completion(of: RequestOperation(request: request))
        #expect(pinned.failure?.transportFailure?.code == .sslPinnedPublicKeyNotMatch, "\(pinned)")

        // The insecure connection is not reused by a request that verifies.
        let strict = await completion(of: RequestOperation(request: Request(url: server.url("/files/1k"))))
        #expect(strict.failure?.transportFailure?.code == .peerFailedVerification, "\(strict)")

        // Off by default.
        #expect(Request.TLSOptions().insecureSkipsVerificationForLocalTestingOnly == false)
    }
}
