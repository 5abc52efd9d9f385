@testable import curlq
import CurlQueueDownloads
import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// `-u`, `--netrc-file` and `-b`: what is sent, to whom, and that it is never shown.
@Suite struct CurlqCredentialsTests {
    static let password = "pa55-w0rd-SECRET"

    @Test func netrcFilesParseAsCurlReadsThem() throws {
        let text = """
            # comment
            machine example.org login alice password "with space \\" quote"
            default
              login anon password guest
            machine other.example login bob password b0b
            macdef init
            cd /pub

            machine late.example login carol password c
            """
        let netrc = try Netrc.parse(text).get()
        #expect(netrc.login(for: "EXAMPLE.org").map { [$0.0, $0.1] } == ["alice", "with space \" quote"])
        #expect(netrc.login(for: "nowhere").map { [$0.0, $0.1] } == ["anon", "guest"])
        #expect(netrc.login(for: "late.example").map { [$0.0, $0.1] } == ["carol", "c"])
        #expect(throws: InputProblem.self) { try Netrc.parse("machine").get() }
        #expect(throws: InputProblem.self) { try Netrc.parse("login x").get() }
        #expect(throws: InputProblem.self) { try Netrc.parse("host x").get() }
    }

    @Test func cookiesMatchDomainPathSchemeAndExpiry() throws {
        let text = """
            # Netscape HTTP Cookie File
            .example.org\tTRUE\t/\tFALSE\t0\tall\t1
            example.org\tFALSE\t/docs\tFALSE\t0\tdocs\t2
            #HttpOnly_example.org\tFALSE\t/\tTRUE\t0\tsecure\t3
            example.org\tFALSE\t/\tFALSE\t1000\told\t4

            """
        let cookies = try Cookie.parseFile(text).get()
        #expect(cookies.count == 4)
        var credentials = Credentials()
        credentials.cookies = cookies
        func cookie(_ url: String) -> String? {
            credentials.fields(for: URL(string: url)!, besides: []).first { $0.name == "Cookie" }?.value
        }
        #expect(cookie("http://sub.example.org/x") == "all=1")
        #expect(cookie("http://example.org/docs/a") == "all=1; docs=2")
        #expect(cookie("http://example.org/docsx") == "all=1")
        #expect(cookie("https://example.org/") == "all=1; secure=3")
        #expect(cookie("http://other.org/") == nil)
        #expect(cookie("http://notexample.org/") == nil)
        #expect(throws: InputProblem.self) { try Cookie.parseFile("a\tb\tc").get() }
        #expect(throws: InputProblem.self) { try Cookie.parseFile("d\tTRUE\t/\tFALSE\tsoon\tn\tv").get() }
        #expect(throws: InputProblem.self) { try Cookie.parseFile("d\tTRUE\t/\tFALSE\t0\tn\tv;x").get() }
    }

    @Test func userWithoutPasswordIsRefusedAndExplicitHeadersWin() throws {
        #expect(throws: InputProblem.self) { try Credentials.parseUser("alice").get() }
        let parsed = try Credentials.parseUser("alice:a:b").get()
        #expect(parsed.name == "alice" && parsed.password == "a:b")
        var credentials = Credentials()
        credentials.user = parsed
        let url = URL(string: "http://example.org/")!
        #expect(credentials.fields(for: url, besides: []).map(\.value) == ["Basic " + Data("alice:a:b".utf8).base64EncodedString()])
        #expect(credentials.fields(for: url, besides: [HeaderField(name: "authorization", value: "Bearer x")]).isEmpty)
    }

    /// `-u` reaches the URL's origin and stops at a redirect to another one; the password is in
    /// none of standard output, standard error (with a failure to report) and the JSON report.
    @Test func userPasswordGoesToItsOriginOnlyAndIsNeverShown() async throws {
        try await withServer { server in
            try await withServer { other in
                try await withFolder { folder in
                    let target = other.url("/bytes/20").absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                    let run = try await curlq([
                        "get", "-d", folder.path, "--json", "-u", "alice:\(Self.password)",
                        server.url("/redirect?to=\(target)").absoluteString, server.url("/status/404").absoluteString,
                    ])
                    #expect(run.status == 1, "\(run)")  // the 404
                    let basic = "Basic " + Data("alice:\(Self.password)".utf8).base64EncodedString()
                    #expect(server.requests.first?.header("Authorization") == basic)
                    #expect(other.requests.count == 1)
                    #expect(other.requests.first?.header("Authorization") == nil)
                    let encoded = Data("alice:\(Self.password)".utf8).base64EncodedString()
                    for text in [run.stdout, run.stderr] {
                        #expect(!text.contains(Self.password) && !text.contains(encoded), "\(run)")
                    }
                }
            }
        }
    }

    /// `--netrc-file` gives the login of the URL's host; `-b FILE` its cookies; a redirect to
    /// another origin gets neither. A missing file is a usage error before any request.
    @Test func netrcAndCookieFilesGoToTheirOriginOnly() async throws {
        try await withServer { server in
            try await withServer { other in
                try await withFolder { folder in
                    let netrc = folder.appendingPathComponent("netrc")
                    try Data("machine elsewhere login x password y\nmachine 127.0.0.1 login bob password \(Self.password)\n".utf8).write(to: netrc)
                    let cookies = folder.appendingPathComponent("cookies.txt")
                    try Data("127.0.0.1\tFALSE\t/\tFALSE\t0\tsession\tabc123\n".utf8).write(to: cookies)
                    let downloads = folder.appendingPathComponent("downloads")
                    let target = other.url("/bytes/20").absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                    let run = try await curlq([
                        "get", "-d", downloads.path, "--netrc-file", netrc.path, "-b", cookies.path,
                        server.url("/redirect?to=\(target)").absoluteString,
                    ])
                    #expect(run.status == 0, "\(run)")
                    let first = try #require(server.requests.first)
                    #expect(first.header("Authorization") == "Basic " + Data("bob:\(Self.password)".utf8).base64EncodedString())
                    #expect(first.header("Cookie") == "session=abc123")
                    let hop = try #require(other.requests.first)
                    #expect(hop.header("Authorization") == nil && hop.header("Cookie") == nil)

                    let missing = try await curlq([
                        "get", "-d", downloads.path, "--netrc-file", folder.appendingPathComponent("none").path, server.url("/bytes/1").absoluteString,
                    ])
                    #expect(missing.status == 2 && missing.stderr.contains("netrc file"), "\(missing)")
                    let prompt = try await curlq(["get", "-d", downloads.path, "-u", "alice", server.url("/bytes/1").absoluteString])
                    #expect(prompt.status == 2 && prompt.stderr.contains("user:password"), "\(prompt)")
                    #expect(server.requests.count == 1)
                }
            }
        }
    }
}
