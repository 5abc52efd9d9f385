import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import InMemoryTracing
import Testing
import Tracing

/// A span's `url.full` hides what the library's redactor hides: userinfo and the values of
/// query parameters whose names look like credentials.
@Suite struct TracingURLRedactionTests {
    @Test func secretsAreRedactedInURLFull() async throws {
        try await withServer { server in
            let tracer = InMemoryTracer()
            let queue = RequestQueue(tracer: tracer)
            let url = URL(string: "http://alice:hunter2@127.0.0.1:\(server.port)/bytes/10?access_token=SECRET-T&page=2&sig=SECRET-S")!
            _ = try await queue.response(for: Request(url: url))
            await drain()
            #expect(tracer.finishedSpans.count == 2)
            for span in tracer.finishedSpans {
                guard case .string(let full) = span.attributes.get("url.full") else {
                    Issue.record("no url.full in \(span)")
                    continue
                }
                #expect(full == "http://REDACTED:REDACTED@127.0.0.1:\(server.port)/bytes/10?access_token=REDACTED&page=2&sig=REDACTED")
                for secret in ["alice", "hunter2", "SECRET"] { #expect(!full.contains(secret)) }
            }
        }
    }
}
