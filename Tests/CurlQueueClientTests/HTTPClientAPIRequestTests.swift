import CurlQueue
import CurlQueueClient
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import HTTPTypes
import Testing

/// Request objects (YTKRequest): a register call with form arguments, outputs other than
/// JSON, and a CDN image downloaded to a file with resume.
@Suite struct HTTPClientAPIRequestTests {
    /// YTKNetwork's RegisterApi, against /echo.
    struct RegisterAPI: APIRequest {
        typealias Output = Echo
        var username: String
        var password: String
        var path: String { "/echo" }
        var method: HTTPRequest.Method { .post }
        var body: HTTPClient.Body? { .form(["username": username, "password": password]) }
        var cacheTTL: Duration? { .seconds(180) }
    }

    @Test func aRequestObjectSendsItsMethodPathAndArguments() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let register = RegisterAPI(username: "ann lee", password: "p&ss=word")
            let echo = try await client.send(register)
            #expect(echo.method == "POST")
            #expect(echo.uri == "/echo")
            #expect(echo.bodyText == "password=p%26ss%3Dword&username=ann+lee")
            #expect(register.cacheTTL == .seconds(180))
        }
    }

    struct Ping: APIRequest {
        typealias Output = NoContent
        var path: String
    }

    struct RawBody: APIRequest {
        typealias Output = Data
        var path: String { "bytes/100" }
    }

    @Test func outputsOtherThanJSON() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let nothing = try await client.send(Ping(path: "bytes/5"))
            #expect(nothing == NoContent())
            let gone = await result { () async throws(HTTPClientError) in try await client.send(Ping(path: "status/410")) }
            #expect(gone.failure?.response?.status.code == 410)
            let raw = try await client.send(RawBody())
            #expect(Array(raw) == FixtureServer.expectedBytes(count: 100))
        }
    }

    /// YTKNetwork's GetImageApi: from the CDN, downloaded to a file, resumable.
    struct GetImageAPI: APIRequest {
        typealias Output = URL
        var imageID: String
        var folder: URL
        var path: String { "bytes/\(imageID)" }
        var useCDN: Bool { true }
        var resumableDownloadDestination: URL? { folder.appendingPathComponent("image-\(imageID)") }
    }

    @Test func aCDNImageDownloadsToItsFileAndResumesAPartOne() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try await withServer { (api) async throws in
            try await withServer { (cdn) async throws in
                let client = makeClient(api) { $0.cdnURL = URL(string: cdn.baseURL)! }
                let request = GetImageAPI(imageID: "200000", folder: folder)
                // An earlier run left the first 50,000 bytes.
                let part = request.resumableDownloadDestination!.appendingPathExtension("part")
                try Data(FixtureServer.expectedBytes(count: 50_000)).write(to: part)
                let file = try await client.send(request)
                #expect(file == request.resumableDownloadDestination)
                #expect(Array(try Data(contentsOf: file)) == FixtureServer.expectedBytes(count: 200_000))
                #expect(!FileManager.default.fileExists(atPath: part.path))
                #expect(cdn.requests.first?.header("Range") == "bytes=50000-")
                #expect(api.requests.isEmpty)
            }
        }
    }
}
