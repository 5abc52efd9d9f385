@testable import curlq
import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Dispatch
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// curlq's TLS trust: a private CA, curl's variables, -k and a pinned key.
@Suite struct CurlqTLSTests {
    /// A private CA is trusted with --cacert or curl's variables; -k works with a warning on
    /// every run and still checks a pinned key.
    @Test func tlsTrustOptionsAndVariables() async throws {
        let server = try await NginxServer.start()
        defer { server.shutdown() }
        try await withFolder { folder in
            let url = server.url("/files/1k").absoluteString
            let body = FixtureServer.expectedBytes(count: 1024)
            func run(_ arguments: [String], _ environment: [String: String] = [:]) async throws -> CurlqRun {
                try? FileManager.default.removeItem(at: folder.appendingPathComponent("1k"))
                // The variables of this process are not to count: only the ones a case sets.
                let unset = ["CURL_CA_BUNDLE": "", "SSL_CERT_FILE": "", "SSL_CERT_DIR": ""]
                return try await CurlqProcess(["get", "--retries", "0", "-d", folder.path] + arguments + [url],
                                              environment: unset.merging(environment) { $1 }).finish()
            }
            let untrusted = try await run([])
            #expect(untrusted.status == 1, "\(untrusted)")
            for (arguments, environment) in [
                (["--cacert", server.caFile], [String: String]()),
                ([], ["CURL_CA_BUNDLE": server.caFile]),
                ([], ["SSL_CERT_FILE": server.caFile]),
                (["--cacert", server.caFile, "--pinnedpubkey", server.publicKeyPin], [:]),
            ] {
                let trusted = try await run(arguments, environment)
                #expect(trusted.status == 0, "\(arguments) \(environment): \(trusted)")
                #expect(contents(folder.appendingPathComponent("1k")) == body)
                #expect(!trusted.stderr.contains("insecure"))
            }
            let insecure = try await run(["-k"])
            #expect(insecure.status == 0 && insecure.stderr.contains("warning: -k/--insecure"), "\(insecure)")
            let wrongPin = try await run(["-k", "--pinnedpubkey", "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="])
            #expect(wrongPin.status == 1, "\(wrongPin)")
            let missing = try await run([], ["CURL_CA_BUNDLE": folder.appendingPathComponent("none.pem").path])
            #expect(missing.status == 2 && missing.stderr.contains("$CURL_CA_BUNDLE: cannot read the CA file"), "\(missing)")
        }
    }

    /// A certificate for another host name is not a CA to add (issue 36): the message says which
    /// it is. And -k with -q prints curlq's one warning, not a library log line per URL.
    @Test func aNameMismatchIsToldFromAnUntrustedCAAndInsecureIsQuiet() async throws {
        let server = try await NginxServer.start()
        defer { server.shutdown() }
        try await withFolder { folder in
            let unset = ["CURL_CA_BUNDLE": "", "SSL_CERT_FILE": "", "SSL_CERT_DIR": ""]
            let wrongName = server.url("/files/1k", certificate: .wrongName).absoluteString
            let mismatch = try await CurlqProcess(["get", "--retries", "0", "-d", folder.path, "--cacert", server.caFile, wrongName],
                                                  environment: unset).finish()
            #expect(mismatch.status == 1, "\(mismatch)")
            #expect(mismatch.stderr.contains("not for this host name"), "\(mismatch.stderr)")
            #expect(!mismatch.stderr.contains("--cacert"), "a name mismatch is not fixed by a CA: \(mismatch.stderr)")
            let untrusted = try await CurlqProcess(["get", "--retries", "0", "-d", folder.path, server.url("/files/1k").absoluteString],
                                                   environment: unset).finish()
            #expect(untrusted.status == 1, "\(untrusted)")
            #expect(untrusted.stderr.contains("not trusted") && untrusted.stderr.contains("--cacert adds a CA"), "\(untrusted.stderr)")

            let urls = ["/files/1k", "/files/1k?b", "/files/1k?c"].map { server.url($0).absoluteString }
            let quiet = try await CurlqProcess(["get", "-k", "-q", "-d", folder.path] + urls, environment: unset).finish()
            #expect(quiet.status == 0, "\(quiet)")
            let lines = quiet.stderr.split(separator: "\n").filter { !$0.hasPrefix("curlq: peak memory") }
            #expect(lines.count == 1 && lines[0].hasPrefix("curlq: warning: -k/--insecure"), "\(quiet.stderr)")
        }
    }
}
