// The OpenAPI fixture server (Tests/CurlQueueTestSupport/OpenAPIFixtureServer.swift) in a process
// of its own, for the OpenAPI transports' benchmark (Benchmarks/openapi.py). Prints its base URL
// (`http://127.0.0.1:PORT`) on a line of its own, then serves until it is killed.
import CurlQueueTestSupport
import Foundation

let server = try await OpenAPIFixtureServer.start()
FileHandle.standardOutput.write(Data((server.baseURL.absoluteString + "\n").utf8))
while true {
    sleep(3600)  // the server runs on its own threads; this process only waits to be killed
}
