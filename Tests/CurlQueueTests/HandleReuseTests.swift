import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import HTTPTypes
import Testing

/// The engine pools its libcurl handles, and a handle whose transfer ended well keeps its
/// options for the next transfer that would set the same ones. These transfers run one after
/// another, so each usually gets the handle the one before it let go of: none may see an option
/// of another (a method, a field, no body, a time limit, a redirect rule).
@Suite struct HandleReuseTests {
    struct Echo: Decodable {
        var method: String
        var headers: [[String]]
        var bodyLength: Int

        func values(_ name: String) -> [String] {
            headers.filter { $0[0].lowercased() == name.lowercased() }.map { $0[1] }
        }
    }

    func run(_ request: Request) async throws -> Response {
        try await RequestOperation(request: request).response()
    }

    func echo(_ request: Request) async throws -> Echo {
        try JSONDecoder().decode(Echo.self, from: try await run(request).body)
    }

    @Test func noTransferSeesAnotherOnesOptions() async throws {
        try await withServer { server in
            let url = server.url("/echo")
            for round in 0..<3 {
                var withField = Request(url: url)
                withField.addHeader("X-Round", "\(round)")
                #expect(try await echo(withField).values("X-Round") == ["\(round)"])
                let plain = try await echo(Request(url: url))
                #expect(plain.method == "GET")
                #expect(plain.values("X-Round").isEmpty)

                let head = try await run(Request(url: url, method: .head))
                #expect(head.status == .ok)
                #expect(head.body.isEmpty)
                let afterHead = try await run(Request(url: url))
                #expect(!afterHead.body.isEmpty, "a GET after a HEAD has its body")

                let delete = try await echo(Request(url: url, method: .delete))
                #expect(delete.method == "DELETE")
                #expect(try await echo(Request(url: url)).method == "GET")

                let post = try await echo(Request(url: url, method: .post, body: .bytes(Data("abc".utf8))))
                #expect(post.method == "POST")
                #expect(post.bodyLength == 3)
                let afterPost = try await echo(Request(url: url))
                #expect(afterPost.method == "GET")
                #expect(afterPost.bodyLength == 0)

                // A time limit kept from the transfer before would end this slow one.
                var limited = Request(url: server.url("/bytes/10"))
                limited.timeouts.total = .milliseconds(1500)
                #expect(try await run(limited).status == .ok)
                let slow = try await run(Request(url: server.url("/bytes/10?delay=1700")))
                #expect(slow.status == .ok)

                // A redirect rule kept from the transfer before would follow (or not follow) this one.
                var notFollowing = Request(url: server.url("/redirect-chain/1"))
                notFollowing.redirectPolicy = .none
                #expect(try await run(notFollowing).status == .found)
                #expect(try await run(Request(url: server.url("/redirect-chain/1"))).status == .ok)
                #expect(try await run(notFollowing).status == .found)
            }
        }
    }

    @Test func aFailedTransferLeavesNothingBehind() async throws {
        try await withServer { server in
            var tooBig = Request(url: server.url("/bytes/5000?chunked=1"))
            tooBig.maxResponseBodySize = 100
            for _ in 0..<3 {
                let failed = await completion(of: RequestOperation(request: tooBig))
                #expect(transportCode(of: failed) == .fileSizeExceeded)
                let response = try await run(Request(url: server.url("/bytes/5000?chunked=1")))
                #expect(response.body.count == 5000)
            }
        }
    }
}
