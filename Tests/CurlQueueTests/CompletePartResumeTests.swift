import CCurl  // setxattr (sys/xattr.h, through the shim)
import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// A `.part` that already holds the whole file (its process was killed after the last byte,
/// before the rename): the resume's 416 completes it from disk instead of fetching it again,
/// but only when the server accepted the `.part`'s validator.
@Suite struct CompletePartResumeTests {
    /// What the core keeps beside a `.part`: the validator its bytes were fetched with.
    func setValidator(_ value: String, on file: URL) {
        let path = part(file).path
        #expect(setxattr(path, "user.curlqueue.validator", value, value.utf8.count, 0) == 0)
    }

    @Test func aWholePartWithItsValidatorCompletesFromDiskOnTheServers416() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let destination = folder.appendingPathComponent("whole")
                try Data(FixtureServer.expectedBytes(count: 30_000)).write(to: part(destination))
                setValidator("\"E\"", on: destination)
                let request = Request(url: server.url("/bytes/30000?etag=E"), destination: destination, resume: true)
                let response = try await RequestOperation(request: request).response()
                #expect(response.status == .ok)
                #expect(response.fileURL == destination)
                #expect(response.body.isEmpty, "the 416's text is not the file's body")
                #expect(try Data(contentsOf: destination) == Data(FixtureServer.expectedBytes(count: 30_000)))
                #expect(!FileManager.default.fileExists(atPath: part(destination).path))
                #expect(server.requests.count == 1, "the 416 only: nothing fetched again")
            }
        }
    }

    /// nginx: the validator it sent accepted (416, no body byte fetched again); another
    /// validator (the file changed) gets the whole file with 200, and no stale byte stays.
    @Test func nginxCompletesAWholePartOnlyWithItsOwnValidator() async throws {
        let server = try await NginxServer.start()
        defer { server.shutdown() }
        try await withFolder { folder in
            var head = Request(url: server.url("/files/1m"), method: .head)
            head.tls.caFile = server.caFile
            let etag = try #require(try await RequestOperation(request: head).response().headerFields[.eTag])
            let expected = Data(FixtureServer.expectedBytes(count: 1 << 20))
            for (validator, refetched) in [(etag, false), ("\"changed\"", true)] {
                let destination = folder.appendingPathComponent(refetched ? "changed" : "same")
                var stale = expected
                if refetched { stale[1000] ^= 0xFF }  // what the .part holds is not the server's file
                try stale.write(to: part(destination))
                setValidator(validator, on: destination)
                var request = Request(url: server.url("/files/1m"), destination: destination, resume: true)
                request.tls.caFile = server.caFile
                let response = try await RequestOperation(request: request).response()
                #expect(response.status == .ok, "\(response)")
                #expect(try Data(contentsOf: destination) == expected)
                if refetched {
                    #expect(response.metrics.bytesReceived == 1 << 20, "a changed validator: the whole file again")
                } else {
                    #expect(response.metrics.bytesReceived < 1024, "the 416's text only, \(response.metrics.bytesReceived) bytes")
                }
            }
        }
    }
}
