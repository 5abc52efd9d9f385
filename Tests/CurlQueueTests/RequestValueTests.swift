@testable import CurlQueue
import CurlQueueTestHelpers
import Foundation
import HTTPTypes
import Testing

/// `Request` keeps its values behind one shared reference (copy on write): a copy must still
/// behave as a value — changing it, by any property or method, leaves every other copy as it
/// was, on any thread.
@Suite struct RequestValueTests {
    static let url = URL(string: "http://127.0.0.1:1/a")!

    @Test func requestsFromIdenticalParametersAreEqualAndHashAlike() {
        func make() -> Request {
            var request = Request(url: URL(string: "http://127.0.0.1/a?b=1")!, method: .post, body: .bytes(Data("x".utf8)))
            request.addHeader("X-One", "1")
            request.timeouts.total = .seconds(3)
            return request
        }
        #expect(make() == make())
        #expect(Set([make(), make()]).count == 1)
        var other = make()
        other.addHeader("X-Two", "2")
        #expect(other != make())
        var elsewhere = make()
        elsewhere.destination = URL(fileURLWithPath: "/tmp/x")
        #expect(elsewhere != make())
    }

    @Test func changingACopyLeavesTheOriginalAlone() {
        func make() -> Request {
            var request = Request(url: Self.url)
            request.addHeader("Accept", "text/plain")
            return request
        }
        let original = make()
        var copy = original
        copy.url = URL(string: "http://127.0.0.1:1/b")!
        copy.method = .post
        copy.headerFields.append(HTTPField(name: .cookie, value: "a=1"))
        copy.headerFields[.accept] = "application/json"
        copy.body = .bytes(Data("x".utf8))
        copy.timeouts.total = .seconds(3)
        copy.redirectPolicy = .none
        copy.destination = URL(fileURLWithPath: "/tmp/x")
        copy.resume = true
        copy.tls.caFile = "/etc/ca.pem"
        copy.allowedSchemes.insert("ftp")
        copy.maxResponseBodySize = 10
        copy.discardsBody = true
        copy.addHeader("Bad Name", "x")  // recorded as a problem of the copy only

        // Against a request built anew: `==` on two copies sharing one storage would hold
        // without comparing anything.
        #expect(original == make())
        #expect(original.url == Self.url)
        #expect(original.method == .get)
        #expect(original.headerFields == [.accept: "text/plain"])
        #expect(original.body == nil)
        #expect(original.timeouts.total == nil)
        #expect(original.redirectPolicy == .follow(max: 10))
        #expect(original.destination == nil)
        #expect(!original.resume)
        #expect(original.tls.caFile == nil)
        #expect(original.allowedSchemes == ["http", "https"])
        #expect(original.maxResponseBodySize == nil)
        #expect(!original.discardsBody)
        #expect(original.problems.isEmpty)

        #expect(copy != original)
        #expect(copy.headerFields[.accept] == "application/json")
        #expect(copy.headerFields[.cookie] == "a=1")
        #expect(copy.allowedSchemes == ["ftp", "http", "https"])
        #expect(copy.problems.count == 1)
    }

    @Test func changingTheOriginalLeavesACopyAlone() {
        var original = Request(url: Self.url)
        let copy = original
        original.headerFields.append(HTTPField(name: .accept, value: "*/*"))
        original.tls.pinnedPublicKey = "sha256//x"
        #expect(copy.headerFields.isEmpty)
        #expect(copy.tls.pinnedPublicKey == nil)
        #expect(copy == Request(url: Self.url))
    }

    @Test func requestsWithEqualValuesAreEqualWhateverTheirStorage() {
        var lhs = Request(url: Self.url)
        lhs.addHeader("A", "1")
        var rhs = Request(url: Self.url)
        rhs.headerFields.append(HTTPField(name: HTTPField.Name("A")!, value: "1"))
        #expect(lhs == rhs)
        #expect(lhs.hashValue == rhs.hashValue)
        rhs.resume = true
        #expect(lhs != rhs)
    }

    /// Copies made from one request and changed on 8 threads at once: each thread sees only
    /// its own changes (the shared storage is copied before any write).
    @Test func copiesChangedOnManyThreadsStayApart() async {
        func make() -> Request {
            var request = Request(url: Self.url)
            request.addHeader("X-Base", "1")
            return request
        }
        let shared = make()
        let results = await withTaskGroup(of: Bool.self) { group in
            for index in 0..<8 {
                group.addTask {
                    var mine = shared
                    for round in 0..<200 {
                        mine.headerFields[HTTPField.Name("X-Thread")!] = "\(index)-\(round)"
                        mine.maxResponseBodySize = Int64(index * 1_000 + round)
                    }
                    return mine.headerFields[HTTPField.Name("X-Thread")!] == "\(index)-199"
                        && mine.maxResponseBodySize == Int64(index * 1_000 + 199)
                        && mine.headerFields[HTTPField.Name("X-Base")!] == "1"
                }
            }
            var all: [Bool] = []
            for await result in group { all.append(result) }
            return all
        }
        #expect(results == Array(repeating: true, count: 8))
        #expect(shared == make())
        #expect(shared.headerFields.count == 1)
    }
}
