import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// `Request.fileDigests`: digests of a downloaded file computed as its bytes are written.
@Suite struct FileDigestTests {
    @Test func everyDigestIsComputedAsTheBytesAreWritten() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let destination = folder.appendingPathComponent("file.bin")
                var request = Request(url: server.url("/bytes/777777"), destination: destination)
                request.fileDigests = Set(DigestAlgorithm.allCases)
                let response = try await RequestOperation(request: request).response()
                #expect(response.fileURL == destination)
                // Checked against the system's own tools reading the file written.
                for algorithm in DigestAlgorithm.allCases {
                    let expected = try Self.systemDigest(algorithm, of: destination)
                    #expect(response.fileDigests[algorithm] == expected, "\(algorithm)")
                    #expect(expected.utf8.count == algorithm.hexLength)
                }
                #expect(response.fileDigests[.sha256] == SHA256.hex(of: FixtureServer.expectedBytes(count: 777_777)))
            }
        }
    }

    @Test func noDigestsWhenNoneAreAsked() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let destination = folder.appendingPathComponent("file.bin")
                let response = try await RequestOperation(request: Request(url: server.url("/bytes/1000"), destination: destination)).response()
                #expect(response.fileURL == destination)
                #expect(response.fileDigests.isEmpty)
            }
        }
    }

    /// A resumed file's first bytes were written before: the transfer does not claim a
    /// digest of bytes it never saw (the caller hashes the file from disk).
    @Test func aResumedFileHasNoDigests() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let destination = folder.appendingPathComponent("file.bin")
                let whole = FixtureServer.expectedBytes(count: 100_000)
                try Data(whole.prefix(40_000)).write(to: URL(fileURLWithPath: destination.path + ".part"))
                var request = Request(url: server.url("/bytes/100000"), destination: destination, resume: true)
                request.fileDigests = [.sha256]
                let response = try await RequestOperation(request: request).response()
                #expect(response.status.code == 206)
                #expect(try Data(contentsOf: destination) == Data(whole))
                #expect(response.fileDigests.isEmpty)
            }
        }
    }

    /// `sha256sum`, `sha512sum`, `sha1sum` or `md5sum` (coreutils) of a file.
    static func systemDigest(_ algorithm: DigestAlgorithm, of file: URL) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/\(algorithm.rawValue)sum")
        process.arguments = [file.path]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: output, as: UTF8.self).split(separator: " ").first.map(String.init) ?? ""
    }
}
