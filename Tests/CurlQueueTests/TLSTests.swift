import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// HTTPS against nginx with a certificate from a throw-away CA: verification is on and fails
/// closed; a named CA or a pinned key is what makes it trusted; HTTP/2 multiplexes.
@Suite(.serialized) struct TLSTests {
    func withNginx<T>(_ body: (NginxServer) async throws -> T) async throws -> T {
        let server = try await NginxServer.start()
        defer { server.shutdown() }
        return try await body(server)
    }

    @Test func anUntrustedCertificateFailsClosed() async throws {
        try await withNginx { server in
            let operation = RequestOperation(request: Request(url: server.url("/files/1k")))
            operation.autoRetry = true  // a certificate failure is never retried
            let result = await completion(of: operation)
            #expect(result.failure?.transportFailure?.code == .peerFailedVerification, "\(result)")
        }
    }

    /// What a flawed certificate meets: verification failure (60) at the one handshake, for the
    /// reason given (OpenSSL's words in libcurl's message). The
    /// operation has `autoRetry` on, and nginx accepts exactly two connections meanwhile: the
    /// operation's one handshake and the status request that counts them (a retry would add
    /// one per attempt, five in all).
    @Test(arguments: [
        // A certificate from the named CA, for another name only.
        (NginxServer.Certificate.wrongName, true, false, "no alternative certificate subject name matches"),
        // A certificate from the named CA, for the right name, that expired in 2020.
        (.expired, true, false, "certificate has expired"),
        // A self-signed leaf, with the test CA named and without.
        (.selfSigned, true, false, "self-signed certificate"),
        (.selfSigned, false, false, "self-signed certificate"),
        // The right key pinned but no CA named: a pin narrows trust, it does not replace it.
        (.valid, false, true, "unable to get local issuer certificate"),
        (.selfSigned, false, true, "self-signed certificate"),
    ])
    func aFlawedCertificateFailsClosedAtTheFirstHandshakeWithoutRetry(
        certificate: NginxServer.Certificate, namesTheCA: Bool, pinsTheKey: Bool, reason: String
    ) async throws {
        try await withNginx { server in
            var request = Request(url: server.url("/files/1k", certificate: certificate))
            if namesTheCA { request.tls.caFile = server.caFile }
            if pinsTheKey { request.tls.pinnedPublicKey = server.publicKeyPin }
            let operation = RequestOperation(request: request)
            operation.autoRetry = true
            operation.retryPolicy.initialBackoff = .milliseconds(10)
            let before = try await server.acceptedConnectionCount()
            let result = await completion(of: operation)
            #expect(transportCode(of: result) == .peerFailedVerification, "\(result)")
            #expect(result.failure?.transportFailure?.message.contains(reason) == true, "\(result)")
            let accepted = try await server.acceptedConnectionCount() - before
            #expect(accepted == 2, "nginx accepted \(accepted) connections")
        }
    }

    /// A plain-HTTP fixture redirects to nginx's HTTPS port. With the CA named the redirect is
    /// followed to the 1 KiB file; without it, the HTTPS leg fails verification like a direct
    /// request; with `allowedSchemes` of only `http`, the redirect is refused (code 1) and
    /// nginx sees no connection.
    @Test func aRedirectFromHTTPToHTTPSIsVerifiedAndBoundByTheAllowedSchemes() async throws {
        try await withNginx { nginx in
            try await withServer { server in
                let target = nginx.url("/files/1k").absoluteString
                let encoded = target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                let start = server.url("/redirect?to=\(encoded)")

                var trusted = Request(url: start)
                trusted.tls.caFile = nginx.caFile
                let response = try await RequestOperation(request: trusted).response()
                #expect(response.status.code == 200)
                #expect(response.bodyBytes == FixtureServer.expectedBytes(count: 1024))
                #expect(response.effectiveURL?.absoluteString == target)
                #expect(response.metrics.redirectCount == 1)

                let untrusted = await completion(of: RequestOperation(request: Request(url: start)))
                #expect(transportCode(of: untrusted) == .peerFailedVerification, "\(untrusted)")

                var httpOnly = Request(url: start, allowedSchemes: ["http"])
                httpOnly.tls.caFile = nginx.caFile
                let before = try await nginx.acceptedConnectionCount()
                let refused = await completion(of: RequestOperation(request: httpOnly))
                #expect(transportCode(of: refused) == .unsupportedProtocol, "\(refused)")
                // Only the status request's own connection.
                #expect(try await nginx.acceptedConnectionCount() - before == 1)
            }
        }
    }

    @Test func aNamedCAIsTrustedAndHTTP2IsNegotiated() async throws {
        try await withNginx { server in
            var request = Request(url: server.url("/files/1m"))
            request.tls.caFile = server.caFile
            let response = try await RequestOperation(request: request).response()
            #expect(response.status == .ok)
            #expect(response.httpVersion == .http2)
            #expect(response.bodyBytes == FixtureServer.expectedBytes(count: 1 << 20))
            #expect(response.metrics.tlsHandshake > .zero)
        }
    }

    @Test func aMatchingPinnedKeyIsAccepted() async throws {
        try await withNginx { server in
            var request = Request(url: server.url("/files/1k"))
            request.tls.caFile = server.caFile
            request.tls.pinnedPublicKey = server.publicKeyPin
            let response = try await RequestOperation(request: request).response()
            #expect(response.status == .ok)
        }
    }

    @Test func aWrongPinnedKeyFails() async throws {
        try await withNginx { server in
            var request = Request(url: server.url("/files/1k"))
            request.tls.caFile = server.caFile
            request.tls.pinnedPublicKey = "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
            let result = await completion(of: RequestOperation(request: request))
            #expect(result.failure?.transportFailure?.code == .sslPinnedPublicKeyNotMatch, "\(result)")
        }
    }

    /// 100 transfers at once over HTTPS share one HTTP/2 connection (libcurl's default limit
    /// of concurrent streams on one connection is 100).
    @Test func concurrentTransfersMultiplexOnOneConnection() async throws {
        try await withNginx { server in
            let before = try await server.acceptedConnectionCount()
            let queue = RequestQueue(maxConcurrentRequestCount: 0)
            let failures = LockedBox(0)
            for index in 0..<100 {
                var request = Request(url: server.url("/files/1k?i=\(index)"))
                request.tls.caFile = server.caFile
                let operation = RequestOperation(request: request)
                operation.completionHandler = { result in
                    if case .success(let response) = result, response.httpVersion == .http2, response.body.count == 1024 { return }
                    failures.update { $0 += 1 }
                }
                try queue.add(operation)
            }
            await queue.waitUntilAllOperationsAreFinished()
            await drain()
            #expect(failures.value == 0)
            // One connection for the 100 transfers, one for the second status request.
            let opened = try await server.acceptedConnectionCount() - before
            #expect(opened == 2, "nginx accepted \(opened) connections")
        }
    }
}
