@testable import CurlQueue
import CurlQueueTestHelpers
import Foundation
import HTTPTypes
import Testing

/// `Request(string:)` keeps a plain URL string as it is and parses it only when asked: the
/// request must be the one `Request(url: URL(string:)!)` makes — same URL, equal, hashed
/// alike — and the engine must send it and report it as before.
@Suite struct LazyURLTests {
    /// Strings made of pieces chosen to sit on the edges of the plain test: escapes good and
    /// bad, characters `URL(string:)` escapes, ports of every length, a second `#`.
    static func generatedStrings(count: Int) -> [String] {
        // Valid pieces repeated, so that about a third of the strings come out plain.
        let schemes = Array(repeating: "http", count: 8) + ["https", "HTTP", "a+b.c-d", "1x", "", "ht tp"]
        let separators = Array(repeating: "://", count: 12) + [":/", ":", "//"]
        let hosts = Array(repeating: "127.0.0.1", count: 12) + ["a", "", "a_b.c~", "-", "user@h", "[::1]", "h%41", "h st", "é"]
        let ports = Array(repeating: "", count: 6) + [":", ":0", ":8080", ":65535", ":123456", ":8a"]
        let safe = ["/", "a", "%41", "%4a", "?", "=", "&", "'", "!", "$", "(", ")", "*", "+", ",", ";", ":", "@", "~",
                    "-", ".", "_", "..", "//", "#"]
        let unsafe = ["%zz", "%4", "%", " ", "|", "[", "]", "{", "}", "\\", "^", "`", "\"", "<", ">", "é", "\u{7F}", "\t"]
        let pieces = Array(repeating: safe, count: 20).flatMap { $0 } + unsafe
        var generator = SeededGenerator(seed: 0x5EED)  // seeded: a failing string comes back on every run
        return (0..<count).map { _ in
            var string = schemes.randomElement(using: &generator)! + separators.randomElement(using: &generator)!
            string += hosts.randomElement(using: &generator)! + ports.randomElement(using: &generator)!
            for _ in 0..<Int.random(in: 0...8, using: &generator) { string += pieces.randomElement(using: &generator)! }
            return string
        }
    }

    /// What must hold for every string kept as text: `URL(string:)` takes it unchanged, and
    /// the parts the engine and the queue read without parsing are `URL`'s own.
    static func expectKeptAsItIs(_ string: String) {
        guard case .text(let text) = LazyURL(string: string) else {
            Issue.record("a plain string was parsed at once: \(string.debugDescription)")
            return
        }
        let url = URL(string: string)
        #expect(url?.relativeString == string, "\(string.debugDescription)")
        #expect(url?.baseURL == nil)
        #expect(LazyURL.text(text).scheme == url?.scheme, "\(string.debugDescription)")
        #expect(text.host == url?.host, "\(string.debugDescription)")
        #expect(text.port == url?.port, "\(string.debugDescription)")
        if let url { #expect(RequestQueue.origin(of: .text(text)) == RequestQueue.origin(of: url)) }
    }

    @Test func everyPlainStringIsOneURLStringTakesAsItIs() {
        var plain = 0
        for string in Self.generatedStrings(count: 20_000) where LazyURL.isPlain(string) {
            plain += 1
            Self.expectKeptAsItIs(string)
        }
        // Both kinds are tried: the test proves nothing if every string falls on one side.
        #expect(plain > 1_000)
    }

    @Test func everyCharacterInEveryPartIsPlainOnlyWhereURLStringKeepsIt() {
        let characters = (0..<128).map { String(UnicodeScalar(UInt8($0))) }
            + ["%41", "%4A", "%4a", "%zz", "%4", "%", "é", "##", ":80", ":", "@", "//"]
        let templates = ["h*ttp://h/p", "http://h*x/p", "http://h:80*/p", "http://h/p*q", "http://h/p?q*r",
                         "http://h/p#f*g", "http://h*", "http://h:8*", "HTTP://H*x:00080/P?Q#F"]
        var plain = 0
        var other = 0
        for template in templates {
            for character in characters {
                let string = template.replacingOccurrences(of: "*", with: character)
                if LazyURL.isPlain(string) {
                    plain += 1
                    Self.expectKeptAsItIs(string)
                } else {
                    other += 1
                }
            }
        }
        #expect(plain > 300 && other > 300)
    }

    @Test func stringsURLStringWouldChangeOrRefuseAreNotPlain() {
        for string in ["http://a/b c", "http://a/%zz", "http://a/b#c#d", "http://a/?q=[1]", "http://a/é",
                       "http://user@a/", "http://[::1]/", "http://a:123456/", "http://a:b/", "http:/a",
                       "http://", "1http://a/", "http://a/|", "http://h%41/"] {
            #expect(!LazyURL.isPlain(string), "\(string.debugDescription)")
        }
        for string in ["http://127.0.0.1:8080/a/b?c=d&e=%2F#f", "https://a_b.c~/'!$()*+,;=:@", "x-y.z+w://h"] {
            #expect(LazyURL.isPlain(string), "\(string.debugDescription)")
        }
    }

    @Test func aRequestFromAStringIsTheRequestFromItsParsedURL() {
        for string in Self.generatedStrings(count: 3_000) + ["http://127.0.0.1/a?i=1", "http://a/b c"] {
            guard let url = URL(string: string) else {
                #expect(!Request(string: string).problems.isEmpty)
                continue
            }
            let fromString = Request(string: string)
            let fromURL = Request(url: url)
            #expect(fromString.problems.isEmpty)
            #expect(fromString == fromURL, "\(string.debugDescription)")
            #expect(fromString.hashValue == fromURL.hashValue, "\(string.debugDescription)")
            #expect(fromString.url == url)
            #expect(fromString.target.absoluteString == url.absoluteString)
            #expect(fromString.target.scheme == url.scheme)
        }
    }

    @Test func aURLRelativeToABaseIsNotEqualToItsAbsoluteString() {
        let relative = URL(string: "b", relativeTo: URL(string: "http://a/")!)!
        #expect(Request(url: relative) != Request(string: "http://a/b"))
        #expect(Request(url: relative).target.absoluteString == "http://a/b")
    }

    @Test func settingTheURLReplacesTheString() {
        var request = Request(string: "http://127.0.0.1/a")
        request.url = URL(string: "http://127.0.0.1/b")!
        #expect(request.target.absoluteString == "http://127.0.0.1/b")
        #expect(request == Request(string: "http://127.0.0.1/b"))
    }

    @Test func aPlainStringIsParsedOnlyWhenReadAndOnceForAllCopiesAndThreads() async {
        let request = Request(string: "http://127.0.0.1/shared?x=1")
        let copy = request
        guard case .text(let text) = request.target, case .text(let copied) = copy.target else {
            Issue.record("a plain string was parsed at once")
            return
        }
        #expect(text === copied)
        #expect(!text.isParsed)
        #expect(request.target.absoluteString == "http://127.0.0.1/shared?x=1")
        #expect(!text.isParsed)  // the engine's reads parse nothing
        let urls = await withTaskGroup(of: URL.self) { group in
            for index in 0..<8 { group.addTask { index.isMultiple(of: 2) ? request.url : copy.url } }
            return await group.reduce(into: [URL]()) { $0.append($1) }
        }
        #expect(text.isParsed)
        #expect(Set(urls) == [URL(string: "http://127.0.0.1/shared?x=1")!])
    }

    @Test func aPlainStringIsSentAsItIsAndIsTheEffectiveURL() async throws {
        try await withServer { server in
            let string = server.url("/bytes/10").absoluteString + "?a=%41&b=(c)"
            let request = Request(string: string)
            #expect(LazyURL.isPlain(string))
            let response = try await RequestOperation(request: request).response()
            #expect(response.status == .ok)
            // libcurl ended at the very string it was given: the response shares it, unparsed.
            guard case .text(let sent) = request.target, case .text(let effective) = response.effectiveTarget else {
                Issue.record("the effective URL is not the request's own string")
                return
            }
            #expect(sent === effective)
            #expect(!effective.isParsed)
            #expect(response.effectiveURL == URL(string: string))
            #expect(response.effectiveURL?.query == "a=%41&b=(c)")
        }
    }

    @Test func aStringThatRedirectsReportsWhereItEnded() async throws {
        try await withServer { server in
            let response = try await RequestOperation(request: Request(string: server.url("/redirect-chain/2").absoluteString)).response()
            #expect(response.status == .ok)
            #expect(response.effectiveURL == server.url("/redirect-chain/0"))
        }
    }

    @Test func aStringWithASchemeNotAllowedFailsBeforeSending() async throws {
        let result = await completion(of: RequestOperation(request: Request(string: "ftp://127.0.0.1:1/x")))
        guard case .failure(.invalidRequest(let message)) = result else {
            Issue.record("expected invalidRequest, got \(result)")
            return
        }
        #expect(message.contains("ftp"))
    }
}

