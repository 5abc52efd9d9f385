@testable import curlq
import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// `--json`'s schema, version 2 (docs/curlq.md, "The JSON report"): an outcome per file, a
/// reason and an error kind when it was not downloaded, paths only when they exist.
@Suite struct CurlqJSONReportTests {
    @Test func everyRecordHasAnOutcomeAndAScriptCanTellA404FromAnOutage() async throws {
        try await withServer { server in
            try await withFolder { folder in
                try Data("old".utf8).write(to: folder.appendingPathComponent("there"))
                // The first 1,000 bytes of /bytes/3000, left by an earlier run: -c resumes them.
                try Data(FixtureServer.expectedBytes(count: 3000).prefix(1000)).write(to: folder.appendingPathComponent("3000.part"))
                let run = try await withRefusingPort { port in
                    try await curlq("get", "-d", folder.path, "--json", "-q", "--retries", "0", "-c",
                                   server.url("/bytes/1234").absoluteString, server.url("/bytes/3000").absoluteString,
                                   server.url("/status/404").absoluteString, "http://127.0.0.1:\(port)/refused",
                                   "http://nowhere.invalid/dns", server.url("/there").absoluteString)
                }
                #expect(run.status == 1, "\(run)")
                let object = try run.json()
                #expect(object["version"] as? Int == 2)
                #expect(object["downloaded"] as? Int == 2 && object["resumed"] as? Int == 1 && object["failed"] as? Int == 3)
                #expect(object["unfinished"] as? Int == 0)
                let files = try run.jsonFiles()
                try #require(files.count == 6)
                func field(_ index: Int, _ key: String) -> Any? { files[index][key] }

                #expect(field(0, "outcome") as? String == "downloaded")
                #expect(field(0, "path") as? String == folder.appendingPathComponent("1234").standardizedFileURL.path)
                #expect(field(0, "reason") == nil && field(0, "errorKind") == nil && field(0, "partialPath") == nil)

                #expect(field(1, "outcome") as? String == "resumed", "\(files[1])")
                #expect(field(1, "status") as? Int == 206 && field(1, "bytes") as? Int == 3000)

                #expect(field(2, "outcome") as? String == "failed")
                #expect(field(2, "errorKind") as? String == "http" && field(2, "status") as? Int == 404)
                #expect(field(2, "reason") as? String == "HTTP 404 Not Found")
                #expect(field(2, "path") == nil, "a path that does not exist: \(files[2])")

                #expect(field(3, "errorKind") as? String == "connect" && field(3, "status") is NSNull, "\(files[3])")
                #expect((field(3, "reason") as? String)?.hasPrefix("could not connect") == true)
                #expect(field(4, "errorKind") as? String == "dns", "\(files[4])")

                #expect(field(5, "outcome") as? String == "skipped" && field(5, "reason") as? String == "already there", "\(files[5])")
                #expect(field(5, "path") as? String == folder.appendingPathComponent("there").standardizedFileURL.path)
            }
        }
    }

    /// A file stopped part-way keeps its `.part`, and the record says where it is.
    @Test func anInterruptedFileNamesItsPartialFile() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let process = try CurlqProcess(["get", "-d", folder.path, "--json", "-q",
                                                server.url("/bytes/100000?stallAfter=30000").absoluteString])
                let part = folder.appendingPathComponent("100000.part").path
                try await server.waitForRequests(pathPrefix: "/bytes/", count: 1)
                // The server sends 30,000 bytes and stops: wait for them on disk.
                #expect(await waitForFile(part, atLeast: 30_000, timeout: 30))
                process.send(SIGINT)
                let run = await process.finish()
                #expect(run.status == 130, "\(run)")
                let record = try #require(try run.jsonFiles().first)
                #expect(record["outcome"] as? String == "interrupted" && record["errorKind"] as? String == "interrupted", "\(record)")
                #expect(record["partialPath"] as? String == URL(fileURLWithPath: part).standardizedFileURL.path, "\(record)")
                #expect(record["path"] == nil)
                #expect((record["reason"] as? String)?.contains("SIGINT") == true)
                // Its body was a 200's; and a script alerting on `failed > 0` is not woken by a Ctrl-C (issue 36).
                #expect(record["status"] as? Int == 200, "\(record)")
                #expect(record["bytes"] as? Int == 30_000, "\(record)")
                let object = try run.json()
                #expect(object["failed"] as? Int == 0 && object["unfinished"] as? Int == 1, "\(object)")
                #expect(object["interrupted"] as? Bool == true)
            }
        }
    }
}
