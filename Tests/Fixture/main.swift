// A test helper: the fixture server (Tests/CurlQueueTestSupport) in a process of its own, for
// checks that run a client outside the test process (scripts/valgrind-curlq). Prints its base
// URL (`http://127.0.0.1:PORT`) on a line of its own, then serves until it is killed.
import CurlQueueTestSupport
import Foundation

let server = try await FixtureServer.start()
FileHandle.standardOutput.write(Data((server.baseURL + "\n").utf8))
while true {
    sleep(3600)
}
