import CurlQueue
import CurlQueueOpenAPI
import CurlQueueTestSupport
import Foundation
import OpenAPIFixtureClient
import OpenAPIRuntime
import Testing

/// Transport failures reach the caller inside the generated client's `ClientError`, and the
/// configuration can be changed per operation.
@Suite(.timeLimit(.minutes(1))) struct OpenAPIErrorTests {
    @Test func aRefusedConnectionIsTheUnderlyingError() async throws {
        // A port held bound but not listening for the whole test: a server's port just shut
        // down could be taken by another test's server in the parallel suite (seen: a reset).
        try await withRefusingPort { port in
            let client = Client(serverURL: URL(string: "http://127.0.0.1:\(port)")!, transport: CurlQueueTransport())
            do {
                _ = try await client.getItem(path: .init(itemID: 1))
                Issue.record("a call to a closed port succeeded")
            } catch let error as ClientError {
                #expect(error.operationID == "getItem")
                let underlying = try #require(error.underlyingError as? RequestError)
                #expect(underlying.transportFailure?.code == .couldNotConnect, "\(underlying)")
            }
        }
    }

    @Test func aMiddlewareSetsOneOperationsTimeout() async throws {
        let middleware = ConfigurationMiddleware { configuration, operationID in
            if operationID == "getItem" { configuration.timeouts.head = .milliseconds(300) }
        }
        let fixture = try await OpenAPIFixture.start(middlewares: [middleware])
        do {
            _ = try await fixture.client.getItem(path: .init(itemID: 1), headers: .init(xRequestTag: "hold"))
            Issue.record("a call the server never answers succeeded")
        } catch let error as ClientError {
            let underlying = try #require(error.underlyingError as? RequestError)
            guard case .timedOut(let failure) = underlying else {
                Issue.record("expected a timeout, got \(underlying)")
                return
            }
            // The 300 ms limit of this call, not the default's 60 s.
            #expect(failure.message.contains("head limit 0.3 s"), "\(failure)")
        }
        // The other operations keep the transport's configuration.
        let item = try await fixture.client.createItem(body: .json(.init(name: "x"))).created.body.json
        #expect(item.name == "x")
        try await fixture.server.shutdown()
    }

    @Test func aTaskLocalConfigurationAppliesToTheCallsInside() async throws {
        let fixture = try await OpenAPIFixture.start()
        let client = fixture.client
        do {
            _ = try await CurlQueueTransport.withConfiguration({ $0.timeouts.head = .milliseconds(300) }) {
                try await client.getItem(path: .init(itemID: 1), headers: .init(xRequestTag: "hold"))
            }
            Issue.record("a call the server never answers succeeded")
        } catch let error as ClientError {
            let underlying = try #require(error.underlyingError as? RequestError)
            guard case .timedOut(let failure) = underlying else {
                Issue.record("expected a timeout, got \(underlying)")
                return
            }
            // The 300 ms limit of this call, not the default's 60 s.
            #expect(failure.message.contains("head limit 0.3 s"), "\(failure)")
        }
        try await fixture.server.shutdown()
    }
}
