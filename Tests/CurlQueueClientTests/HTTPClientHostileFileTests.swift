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
        try await withFolderAndVictim { setup in
            try await withServer { (server) async throws in
                let client = makeClient(server) { $0.cdnURL = URL(string: server.baseURL)! }
                let request = HTTPClientAPIRequestTests.GetImageAPI(imageID: "20000", folder: setup.folder)
                #expect(symlink(setup.victim.path, request.resumableDownloadDestination!.path + ".part") == 0)
                let file = try await client.send(request)
                #expect(setup.victimIsUntouched)
                #expect(Array(try Data(contentsOf: file)) == FixtureServer.expectedBytes(count: 20_000))
            }
        }
    }
}
