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

/// curlq's header fields: -H for every URL, `header=` lines over them, none to another origin.
@Suite struct CurlqHeaderTests {
    @Test func headersApplyToEveryURLAndHeaderLinesOverrideThem() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let input = """
                    \(server.url("/echo?1"))
                      out=one.json
                    \(server.url("/echo?2"))
                      out=two.json
                      header=x-b: own
                      header=X-C: 4
                      header=X-C: 5
                    """
                let run = try await curlq("get", "-i", "-", "-d", folder.path, "-H", "X-A: 1", "-H", "X-B:  2 ", input: input)
                #expect(run.status == 0, "\(run)")
                func headers(_ name: String) throws -> [[String]] {
                    let object = try JSONSerialization.jsonObject(with: Data(contentsOf: folder.appendingPathComponent(name)))
                    return ((object as? [String: Any])?["headers"] as? [[String]] ?? []).filter { $0.first?.hasPrefix("X-") == true || $0.first?.hasPrefix("x-") == true }
                }
                #expect(try headers("one.json") == [["X-A", "1"], ["X-B", "2"]])
                #expect(try headers("two.json") == [["X-A", "1"], ["x-b", "own"], ["X-C", "4"], ["X-C", "5"]])
            }
        }
    }

    /// `-H` fields stay with the origin they were given for: a redirect to another one gets none.
    @Test func headerFieldsDoNotFollowARedirectToAnotherOrigin() async throws {
        try await withServer { server in
            try await withServer { other in
                try await withFolder { folder in
                    let target = other.url("/bytes/20").absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                    let run = try await curlq("get", "-d", folder.path, "-H", "X-Api-Key: secret", "-H", "Accept: */*",
                                              server.url("/redirect?to=\(target)").absoluteString)
                    #expect(run.status == 0, "\(run)")
                    #expect(contents(folder.appendingPathComponent("redirect")) == FixtureServer.expectedBytes(count: 20))
                    #expect(server.requests.first?.header("X-Api-Key") == "secret")
                    #expect(other.requests.count == 1)
                    #expect(other.requests.first?.header("X-Api-Key") == nil)
                }
            }
        }
    }
}
