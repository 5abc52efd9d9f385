import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// `-v`: the heads of requests and responses on standard error, and no secret anywhere.
@Suite struct CurlqVerboseTests {
    @Test func verboseShowsHeadsWithEverySecretHidden() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let secrets = ["pa55-SECRET-w0rd", "cookieSECRET", "keySECRET", "serverCOOKIE", "urlPASSWORD"]
                var withUser = URLComponents(url: server.url("/bytes/20"), resolvingAgainstBaseURL: false)!
                withUser.user = "bob"
                withUser.password = secrets[4]
                let run = try await curlq([
                    "get", "-v", "--json", "-d", folder.path, "-u", "alice:\(secrets[0])", "-b", "sid=\(secrets[1])",
                    "-H", "X-Api-Key: \(secrets[2])", "-H", "X-Plain: shown",
                    server.url("/set-cookie?session_token=\(secrets[3])").absoluteString, withUser.string!,
                ])
                #expect(run.status == 0, "\(run)")
                #expect(server.requests.contains { $0.header("X-Api-Key") == secrets[2] })
                for line in ["> GET \(server.url("/set-cookie?session_token=REDACTED").absoluteString)", "> Authorization: <redacted>",
                             "> Cookie: <redacted>", "> X-Api-Key: <redacted>", "> X-Plain: shown", "< 200 (",
                             "< Set-Cookie: <redacted>", "< Content-Length: 20"] {
                    #expect(run.stderr.contains(line), "missing \(line): \(run)")
                }
                let basic = Data("alice:\(secrets[0])".utf8).base64EncodedString()
                for secret in secrets + [basic] {
                    #expect(!run.stderr.contains(secret), "\(secret) shown: \(run)")
                }
                // The JSON report keeps URLs as given (docs/security.md): only what is not in a URL.
                for secret in secrets[0..<3] + [basic] {
                    #expect(!run.stdout.contains(secret), "\(secret) shown: \(run)")
                }
            }
        }
    }

    /// -v says where redirects led, and which of the fields given were not sent past a redirect
    /// to another origin (issue 36), by name only.
    @Test func verboseShowsRedirectsAndTheFieldsWithheld() async throws {
        try await withServer { server in
            try await withServer { other in
                try await withFolder { folder in
                    let target = other.url("/bytes/30").absoluteString
                    let away = server.url("/redirect?to=" + target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)
                    let within = server.url("/redirect-chain/2")
                    let run = try await curlq(["get", "-v", "-d", folder.path, "-u", "alice:pa55-SECRET", "-H", "X-Api-Key: keySECRET",
                                               "-H", "Accept: */*", away.absoluteString, within.absoluteString])
                    #expect(run.status == 0, "\(run)")
                    #expect(other.requests.first?.header("Authorization") == nil)
                    #expect(run.stderr.contains("* followed 1 redirect to \(target)"), "\(run.stderr)")
                    #expect(run.stderr.contains("* not sent past the redirect to another origin (http://127.0.0.1:\(other.url("/").port!)): X-Api-Key, Authorization"),
                            "\(run.stderr)")
                    #expect(run.stderr.contains("* followed 2 redirects to \(server.url("/redirect-chain/0").absoluteString)"), "\(run.stderr)")
                    #expect(run.stderr.components(separatedBy: "* not sent").count == 2, "only the redirect away withholds: \(run.stderr)")
                    #expect(!run.stderr.contains("SECRET"))
                }
            }
        }
    }
}
