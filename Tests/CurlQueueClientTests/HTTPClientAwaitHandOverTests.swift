import CurlQueue
import CurlQueueClient
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// Responses awaited through an ``HTTPClient`` (coalesced ones included) are read after an
/// edge ThreadSanitizer sees, as `AwaitHandOverTests` shows for operations; runs only under
/// ThreadSanitizer, the one thing that can see the race.
@Suite struct HTTPClientAwaitHandOverTests {
    @Test(.enabled(if: ProcessInfo.processInfo.environment["CURLQUEUE_SANITIZER"] == "thread",
                   "a race here is seen only by ThreadSanitizer"))
    func responsesAwaitedFromAClientAreReadWithoutARace() async throws {
        try await withServer { server in
            let client = makeClient(server)
            // Equal GETs of several tasks share transfers now and then (the coalescing path).
            try await callConcurrently(tasks: 4, each: 300) {
                let response = try await client.get("bytes/10")
                #expect(response.headerFields[.contentLength] == "10")
            }
        }
    }
}
