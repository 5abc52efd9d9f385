import CurlQueue
import CurlQueueClient
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// The one error type: which case each failure is, what it carries, and how it reads.
@Suite struct HTTPClientErrorTests {
    @Test func aNon2xxStatusForATypedCallIsAStatusErrorWithTheWholeResponse() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            do throws(HTTPClientError) {
                _ = try await client.get("status/404", as: User.self)
                Issue.record("a 404 must not decode")
            } catch {
                guard case .status(let response) = error else { throw error }
                #expect(response.status.code == 404)
                #expect(String(decoding: response.body, as: UTF8.self) == "status 404")
                #expect(error.description.hasPrefix("unexpected status 404 from http://127.0.0.1:"))
            }
        }
    }

    @Test func aDecodingErrorNamesThePlaceInTheDocument() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            let (path, query) = jsonPath(#"{"nick":"ann","level":"high"}"#)
            do throws(HTTPClientError) {
                _ = try await client.get(path, query: query, as: User.self)
                Issue.record("a string level must not decode")
            } catch {
                guard case .decoding(let place, _) = error else { throw error }
                #expect(place == "$.level")
            }
            let (missing, missingQuery) = jsonPath(#"[{"nick":"ann"}]"#)
            do throws(HTTPClientError) {
                _ = try await client.get(missing, query: missingQuery, as: [User].self)
                Issue.record("a missing level must not decode")
            } catch {
                guard case .decoding(let place, let message) = error else { throw error }
                #expect(place == "$[0].level")
                #expect(message.contains("level"))
            }
        }
    }

    @Test func aBodyThatIsNotJSONIsADecodingErrorAtTheRoot() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            do throws(HTTPClientError) {
                _ = try await client.get("bytes/10", as: User.self)
                Issue.record("pattern bytes are not JSON")
            } catch {
                guard case .decoding(let place, _) = error else { throw error }
                #expect(place == "$")
            }
        }
    }

    @Test func noServerIsATransportError() async throws {
        // Port 9 (discard): nothing listens there, and no test server can take it.
        let client = HTTPClient(configuration: .init(baseURL: URL(string: "http://127.0.0.1:9")!))
        do throws(HTTPClientError) {
            _ = try await client.get("anything")
            Issue.record("nothing listens there")
        } catch {
            guard case .transport(.transport(let failure)) = error else { throw error }
            #expect(failure.code == .couldNotConnect)
            #expect(!error.isCancelled)
            #expect(error.description.hasPrefix("transfer failed: CURLE_COULDNT_CONNECT"))
        }
    }

    @Test func descriptionsSayWhatWentWrong() {
        #expect(HTTPClientError.validation(path: "$.question.id", expected: "number", got: "string").description
            == "unexpected JSON at $.question.id: expected number, got string")
        #expect(HTTPClientError.decoding(path: "$", message: "not JSON").description == "cannot decode the response at $: not JSON")
        #expect(HTTPClientError.encoding("bad").description == "cannot encode the request body: bad")
        #expect(HTTPClientError.transport(.cancelled).isCancelled)
        #expect(HTTPClientError.transport(.cancelled).description == "transfer failed: cancelled")
    }

    @Test func descriptionsShowNoPasswordNorSecretQueryValue() async throws {
        try await withServer { (server) async throws in
            let base = URL(string: "http://user:PASSWORD@127.0.0.1:\(server.port)/")!
            let client = HTTPClient(configuration: .init(baseURL: base, queue: RequestQueue()))
            do throws(HTTPClientError) {
                _ = try await client.get("status/500", query: [URLQueryItem(name: "access_token", value: "QSECRET")], as: Echo.self)
                Issue.record("a 500 was taken")
            } catch {
                #expect(error.response?.status.code == 500)
                #expect(!error.description.contains("PASSWORD") && !error.description.contains("QSECRET"), "\(error)")
                #expect(error.description.contains("access_token=REDACTED"), "\(error)")
            }
            #expect(!HTTPClientError.notCached(URL(string: "https://u:PASSWORD@h/x?token=QSECRET")!).description.contains("SECRET"))
            #expect(!HTTPClientError.notCached(URL(string: "https://u:PASSWORD@h/x")!).description.contains("PASSWORD"))
        }
    }
}
