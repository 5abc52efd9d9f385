import CurlQueue
import CurlQueueClient
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// What a hostile file system entry does to an ``HTTPClient`` download (HostileFileTests has
/// the same for plain operations).
@Suite struct HTTPClientHostileFileTests {
    /// `HTTPClient`'s resumable downloads always resume: a planted link is met the same way.
    @Test func anHTTPClientResumableDownloadDoesNotFollowAPlantedLink() async throws {
        let folder = try makeTemporaryFolder()
        let outside = try makeTemporaryFolder()
        defer {
            try? FileManager.default.removeItem(at: folder)
            try? FileManager.default.removeItem(at: outside)
        }
        let victim = outside.appendingPathComponent("victim")
        let secret = Data("do not overwrite me".utf8)
        try secret.write(to: victim)
        try await withServer { (server) async throws in
            let client = makeClient(server) { $0.cdnURL = URL(string: server.baseURL)! }
            let request = HTTPClientAPIRequestTests.GetImageAPI(imageID: "20000", folder: folder)
            #expect(symlink(victim.path, request.resumableDownloadDestination!.path + ".part") == 0)
            let file = try await client.send(request)
            #expect(try Data(contentsOf: victim) == secret)
            #expect(Array(try Data(contentsOf: file)) == FixtureServer.expectedBytes(count: 20_000))
        }
    }
}
