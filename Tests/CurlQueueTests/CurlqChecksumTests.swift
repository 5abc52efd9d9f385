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

/// curlq's checksums (`sha256=`, `sha512=`, `sha1=`, `md5=`): a file that does not match is a
/// failure and is not kept.
@Suite struct CurlqChecksumTests {
    @Test func aSHA256MismatchIsAFailureAndTheFileIsNotKept() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let wrong = String(repeating: "0", count: 64)
                let right = SHA256.hex(of: FixtureServer.expectedBytes(count: 50_000))
                let input = """
                    \(server.url("/bytes/50000"))
                      out=bad.bin
                      sha256=\(wrong)
                    \(server.url("/bytes/50000?x=1"))
                      out=good.bin
                      sha256=\(right.uppercased())
                    """
                let run = try await curlq("get", "-i", "-", "-d", folder.path, "--json", input: input)
                #expect(run.status == 1, "\(run)")
                #expect(files(in: folder) == ["good.bin"], "bad.bin or its working files were kept")
                #expect(run.stderr.contains("bad.bin: sha256 mismatch: expected \(wrong), got \(right)"), "\(run.stderr)")
                let reports = try run.jsonFiles()
                #expect(reports[0]["sha256"] as? String == right)
                #expect((reports[0]["error"] as? String)?.contains("sha256 mismatch") == true)
                #expect(reports[0]["status"] as? Int == 200)
                // The download was deleted: no bytes stand for it (issue 36).
                #expect(reports[0]["bytes"] as? Int == 0, "\(reports[0])")
                #expect(reports[1]["sha256"] as? String == right)
                #expect(reports[1]["error"] is NSNull)
                // An existing file is checked too, and not replaced without --overwrite.
                let again = try await curlq("get", "-i", "-", "-d", folder.path, input: input.replacingOccurrences(of: right.uppercased(), with: wrong))
                #expect(again.status == 1)
                #expect(again.stderr.contains("good.bin is already there but its sha256 is \(right)"), "\(again.stderr)")
                #expect(contents(folder.appendingPathComponent("good.bin")) == FixtureServer.expectedBytes(count: 50_000))
            }
        }
    }

    /// sha512, sha1 and md5 beside sha256: checked as the bytes arrive, or (a resumed `.part`)
    /// from the whole file on disk, so a bad first part written earlier is found too.
    @Test func sha512Sha1AndMD5ChecksumsAreVerified() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let body = FixtureServer.expectedBytes(count: 60_000)
                func digest(_ algorithm: DigestAlgorithm) -> String { FileDigests.hex(algorithm, of: body) }
                #expect(digest(.sha256) == SHA256.hex(of: body))
                // Resumed files: one with the right first bytes, one with wrong ones.
                try Data(body.prefix(20_000)).write(to: folder.appendingPathComponent("resumed.bin.unverified.part"))
                try Data(repeating: 7, count: 20_000).write(to: folder.appendingPathComponent("spliced.bin.unverified.part"))
                let wrongSHA1 = String(repeating: "a", count: 40)
                let input = """
                    \(server.url("/bytes/60000?a=1"))
                      out=a.bin
                      sha512=\(digest(.sha512).uppercased())
                    \(server.url("/bytes/60000?b=1"))
                      out=b.bin
                      sha1=\(wrongSHA1)
                    \(server.url("/bytes/60000?c=1"))
                      out=c.bin
                      md5=\(digest(.md5))
                    \(server.url("/bytes/60000"))
                      out=resumed.bin
                      sha1=\(digest(.sha1))
                    \(server.url("/bytes/60000"))
                      out=spliced.bin
                      md5=\(digest(.md5))
                    """
                let run = try await curlq("get", "-c", "-i", "-", "-d", folder.path, "--json", input: input)
                #expect(run.status == 1, "\(run)")
                #expect(files(in: folder) == ["a.bin", "c.bin", "resumed.bin"], "\(run.stderr)")
                #expect(run.stderr.contains("b.bin: sha1 mismatch: expected \(wrongSHA1), got \(digest(.sha1))"), "\(run.stderr)")
                #expect(run.stderr.contains("spliced.bin: md5 mismatch: expected \(digest(.md5))"), "\(run.stderr)")
                for name in ["a.bin", "c.bin", "resumed.bin"] {
                    #expect(contents(folder.appendingPathComponent(name)) == body, "\(name)")
                }
                let reports = try run.jsonFiles()
                // --json's sha256 comes with every file, the spliced one's being of what it held.
                #expect(reports.prefix(4).map { $0["sha256"] as? String } == Array(repeating: digest(.sha256), count: 4))
                #expect(reports[4]["sha256"] as? String != digest(.sha256))
                #expect(reports[3]["status"] as? Int == 206)

                // A file already there is checked with its own algorithm.
                let again = try await curlq("get", "-i", "-", "-d", folder.path, input: """
                    \(server.url("/bytes/60000?a=1"))
                      out=a.bin
                      sha512=\(String(repeating: "0", count: 128))
                    """)
                #expect(again.status == 1)
                #expect(again.stderr.contains("a.bin is already there but its sha512 is \(digest(.sha512))"), "\(again.stderr)")

                // Bad checksum lines are usage errors.
                let twice = try await curlq("get", "-i", "-", "-d", folder.path, input: """
                    \(server.url("/bytes/1"))
                      sha1=\(digest(.sha1))
                      md5=\(digest(.md5))
                    """)
                #expect(twice.status == 2 && twice.stderr.contains("md5= and sha1= are both given for this URL"), "\(twice.stderr)")
                let short = try await curlq("get", "-i", "-", "-d", folder.path, input: "\(server.url("/bytes/1"))\n  md5=\(digest(.sha1))")
                #expect(short.status == 2 && short.stderr.contains("md5= needs 32 hexadecimal digits"), "\(short.stderr)")
            }
        }
    }

    /// `--checksum ALGO=HEX` (issue 36, aria2c's spelling) checks the one URL as sha256= would.
    @Test func checksumOnTheCommandLine() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let url = server.url("/bytes/5000").absoluteString
                let right = SHA256.hex(of: FixtureServer.expectedBytes(count: 5000))
                let wrong = String(repeating: "0", count: 64)
                let bad = try await curlq("get", "-d", folder.path, "--checksum", "sha-256=\(wrong)", url)
                #expect(bad.status == 1 && bad.stderr.contains("sha256 mismatch"), "\(bad)")
                #expect(files(in: folder).isEmpty)
                let good = try await curlq("get", "-d", folder.path, "--checksum", "SHA-256=\(right.uppercased())", url)
                #expect(good.status == 0, "\(good)")
                #expect(contents(folder.appendingPathComponent("5000")) == FixtureServer.expectedBytes(count: 5000))
                for (arguments, message) in [
                    (["--checksum", "sha256=\(right)", url, url + "?b"], "--checksum is for one URL"),
                    (["--checksum", "crc32=abcd", url], "unknown algorithm 'crc32'"),
                    (["--checksum", "sha-256=abc", url], "sha256= needs 64 hexadecimal digits"),
                ] {
                    let run = try await curlq(["get", "-d", folder.path] + arguments)
                    #expect(run.status == 2 && run.stderr.contains(message), "\(arguments): \(run)")
                }
            }
        }
    }
}
