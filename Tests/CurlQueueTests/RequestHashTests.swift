@testable import CurlQueue
import CurlQueueTestHelpers
import Foundation
import HTTPTypes
import Testing

/// `Request`'s hand-written hash: equal requests must hash alike (the queue finds duplicates
/// by hash value, then `==`), and requests that share a hash value stay told apart by `==`.
@Suite struct RequestHashTests {
    static let url = URL(string: "http://127.0.0.1:1/a?b=c")!

    func expectEqualAndHashAlike(_ lhs: Request, _ rhs: Request, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(lhs == rhs, sourceLocation: sourceLocation)
        #expect(lhs.hashValue == rhs.hashValue, sourceLocation: sourceLocation)
    }

    @Test func requestsBuiltAlikeHashAlike() {
        expectEqualAndHashAlike(Request(url: Self.url), Request(string: Self.url.absoluteString))
        var lhs = Request(url: Self.url, method: .post, body: .bytes(Data("x".utf8)))
        lhs.destination = URL(fileURLWithPath: "/tmp/x")
        lhs.timeouts = Request.Timeouts(connect: .seconds(5), total: .seconds(60))
        lhs.tls.caFile = "/etc/ca.pem"
        lhs.allowedSchemes = ["https", "http"]
        lhs.maxResponseBodySize = 10
        var rhs = Request(url: URL(string: Self.url.absoluteString)!, method: .post, body: .bytes(Data("x".utf8)))
        rhs.destination = URL(fileURLWithPath: "/tmp/x")
        rhs.timeouts.connect = .seconds(5)
        rhs.timeouts.total = .seconds(60)
        rhs.tls = Request.TLSOptions(caFile: "/etc/ca.pem")
        rhs.allowedSchemes = ["http", "https"]
        rhs.maxResponseBodySize = 10
        expectEqualAndHashAlike(lhs, rhs)
    }

    @Test func headerFieldsAddedInAnotherWayButEqualHashAlike() {
        var added = Request(url: Self.url)
        added.addHeader("Accept", "application/json")
        added.addHeader("x-trace", "1")
        added.addHeader("X-Trace", "2")
        // A literal, with the differently named fields in another order and names in another case.
        let literal = Request(
            url: Self.url,
            headerFields: [.init("X-TRACE")!: "1", .accept: "application/json", .init("x-trace")!: "2"]
        )
        expectEqualAndHashAlike(added, literal)
        var appended = Request(url: Self.url)
        appended.headerFields.append(HTTPField(name: .init("X-Trace")!, value: "1"))
        appended.headerFields.append(HTTPField(name: .init("x-Trace")!, value: "2"))
        appended.headerFields[.accept] = "application/json"
        expectEqualAndHashAlike(added, appended)
        // The order of fields of one name matters to `==`.
        var swapped = Request(url: Self.url)
        swapped.addHeader("Accept", "application/json")
        swapped.addHeader("X-Trace", "2")
        swapped.addHeader("X-Trace", "1")
        #expect(added != swapped)
    }

    @Test func theHashedPartsTellRequestsApart() {
        let base = Request(url: Self.url)
        var variants: [Request] = []
        variants.append(Request(url: URL(string: "http://127.0.0.1:1/a?b=d")!))
        variants.append(Request(url: Self.url, method: .head))
        variants.append(Request(url: Self.url, destination: URL(fileURLWithPath: "/tmp/x")))
        variants.append(Request(url: Self.url, body: .bytes(Data())))
        variants.append(Request(url: Self.url, headerFields: [.accept: "*/*"]))
        for variant in variants {
            #expect(variant != base)
            // Hashes are seeded per process; a collision of two of these is a 1 in 2^64 event.
            #expect(variant.hashValue != base.hashValue, "\(variant)")
        }
    }

    @Test func requestsSharingAHashValueAreToldApartByValue() {
        // These differ only in parts that are not hashed.
        var headerValue = Request(url: Self.url)
        headerValue.addHeader("Range", "bytes=0-9")
        var otherHeaderValue = Request(url: Self.url)
        otherHeaderValue.addHeader("Range", "bytes=10-19")
        var timeouts = Request(url: Self.url)
        timeouts.timeouts.total = .seconds(1)
        var schemes = Request(url: Self.url)
        schemes.allowedSchemes = ["https"]
        var problems = Request(url: Self.url)
        problems.addHeader("Bad Name", "x")
        #expect(headerValue.hashValue == otherHeaderValue.hashValue)
        #expect(headerValue != otherHeaderValue)
        for request in [timeouts, schemes, problems] {
            #expect(request.hashValue == Request(url: Self.url).hashValue)
            #expect(request != Request(url: Self.url))
        }

        var index = RequestQueue.DuplicateIndex()
        let first = RequestOperation(request: headerValue)
        let second = RequestOperation(request: otherHeaderValue)
        let again = RequestOperation(request: headerValue)
        #expect(index.insert(first, hash: headerValue.hashValue, findingEqual: true).isEmpty)
        #expect(index.insert(second, hash: otherHeaderValue.hashValue, findingEqual: true).isEmpty)
        #expect(index.insert(again, hash: headerValue.hashValue, findingEqual: true).map(ObjectIdentifier.init) == [ObjectIdentifier(first)])
        #expect(index.operations(equalTo: otherHeaderValue, hash: otherHeaderValue.hashValue).map(ObjectIdentifier.init) == [ObjectIdentifier(second)])
    }
}
