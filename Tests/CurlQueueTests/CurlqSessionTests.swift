@testable import curlq
import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `curlq get --session FILE`: the same command run again after `kill -9` or Ctrl-C skips the
/// files recorded complete without a request, resumes the interrupted ones with Range, and
/// ends with every file byte for byte.
@Suite struct CurlqSessionTests {
    /// The session's counts, as `curlq status` reads them from the store.
    func counts(_ session: URL) async throws -> [String: Int] {
        let run = try await curlq("status", "--store", "sqlite:" + session.path, "--queue", GetSession.queueName, "--json")
        let object = try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any]
        return object?["counts"] as? [String: Int] ?? [:]
    }

    /// Polls the store until `done` holds for its counts (bounded: 60 s).
    func waitForCounts(_ session: URL, _ done: ([String: Int]) -> Bool) async throws -> Bool {
        for _ in 0..<300 {
            if done(try await counts(session)) { return true }
            try await Task.sleep(for: .milliseconds(200))  // the sleep IS the poll of the store
        }
        return false
    }

    @Test(arguments: [SIGKILL, SIGINT])
    func aBatchStoppedMidwayGoesOnWhereItStoppedWhenRunAgain(signal: Int32) async throws {
        try await withServer { server in
            try await withFolder { folder in
                let session = folder.appendingPathComponent("batch.session")
                let files = folder.appendingPathComponent("files")
                // Three files that pause at 30,000 bytes until gate "go" opens, two that finish.
                let held = (1...3).map { server.url("/bytes/\(200_000 + $0)?chunk=10000&holdAt=30000&gate=go").absoluteString }
                let quick = (1...2).map { server.url("/bytes/\(5_000 + $0)").absoluteString }
                let arguments = ["get", "--session", session.path, "-d", files.path, "-j", "5", "--progress", "none", "--json"]
                    + quick + held
                let process = try CurlqProcess(arguments)
                for index in 1...3 {
                    let part = files.appendingPathComponent("\(200_000 + index).part")
                    #expect(await waitForFile(part.path, atLeast: 20_000), "\(part.lastPathComponent) never started")
                }
                // The quick files recorded complete, the held ones running, before the signal.
                let recorded = try await waitForCounts(session) { $0["done"] == 2 && $0["running"] == 3 }
                #expect(recorded, "the session never recorded 2 files complete and 3 running")
                process.send(signal)
                let stopped = await process.finish()
                if signal == SIGKILL {
                    #expect(stopped.killedBySignal && stopped.status == 128 + SIGKILL, "\(stopped)")
                } else {
                    #expect(stopped.status == 130, "\(stopped)")
                    // Ctrl-C gave the held files back: available again, nothing left running.
                    #expect(try await counts(session) == ["done": 2, "waiting": 3])
                }
                #expect(FileManager.default.fileExists(atPath: session.path))

                server.openGate("go")
                server.resetStatistics()
                let again = try await curlq(arguments)
                #expect(again.status == 0, "\(again)")
                #expect(CurlQueueTests.files(in: files) == ["200001", "200002", "200003", "5001", "5002"])
                for name in CurlQueueTests.files(in: files) {
                    #expect(contents(files.appendingPathComponent(name)) == FixtureServer.expectedBytes(count: Int(name)!), "\(name)")
                }
                // Completed files: no request at all (not even the HEAD a rerun without a session sends).
                let quickRequests = server.requests.filter { $0.path.hasPrefix("/bytes/500") }
                #expect(quickRequests.isEmpty, "\(quickRequests.map { "\($0.method) \($0.path)" })")
                // The held files resumed from their .part files, one request each, not from 0.
                let ranges = server.requests.filter { $0.path.hasPrefix("/bytes/2000") }.map { $0.header("Range") }
                #expect(ranges.count == 3 && ranges.allSatisfy { $0?.hasPrefix("bytes=") == true && $0?.hasPrefix("bytes=0-") == false }, "\(ranges)")
                let outcomes = try again.jsonFiles().map { $0["outcome"] as? String }
                #expect(outcomes == ["skipped", "skipped", "resumed", "resumed", "resumed"], "\(outcomes)")
                #expect(try await counts(session) == ["done": 5])

                // A third run: everything recorded complete, nothing asked of the server.
                server.resetStatistics()
                let third = try await curlq(arguments)
                #expect(third.status == 0, "\(third)")
                #expect(server.requests.isEmpty, "\(server.requests.map(\.path))")
            }
        }
    }

    /// Two runs on one session would write the same .part files: the second is refused while the
    /// first runs, and the session is free again once the first is killed.
    @Test func aSessionInUseByARunningCurlqIsRefused() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let session = folder.appendingPathComponent("batch.session")
                let files = folder.appendingPathComponent("files")
                let url = server.url("/bytes/200000?chunk=10000&holdAt=30000&gate=go").absoluteString
                let arguments = ["get", "--session", session.path, "-d", files.path, "--progress", "none", url]
                let first = try CurlqProcess(arguments)
                #expect(await waitForFile(files.appendingPathComponent("200000.part").path, atLeast: 20_000), "never started")
                let running = try await waitForCounts(session) { $0["running"] == 1 }
                #expect(running, "the first run was never recorded running")
                let second = try await curlq(arguments)
                #expect(second.status == 2, "\(second)")
                #expect(second.stderr.contains("is in use by another curlq"), "\(second.stderr)")
                #expect(server.requests.count == 1, "\(server.requests.map(\.path))")
                first.send(SIGKILL)
                _ = await first.finish()
                server.openGate("go")
                let third = try await curlq(arguments)
                #expect(third.status == 0, "\(third)")
                #expect(contents(files.appendingPathComponent("200000")) == FixtureServer.expectedBytes(count: 200_000))
            }
        }
    }

    /// A session file that is not a store is a usage error: exit 2, the file as it was, no request.
    @Test func aSessionFileThatIsNotAStoreIsAUsageErrorAndKeptAsItIs() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let session = folder.appendingPathComponent("notes.txt")
                let garbage = Data("these are my notes, not a session\n".utf8) + Data(repeating: 0x5A, count: 5000)
                try garbage.write(to: session)
                let run = try await curlq("get", "--session", session.path, "-d", folder.path, server.url("/bytes/5000").absoluteString)
                #expect(run.status == 2, "\(run)")
                #expect(run.stderr.contains("is not a curlq session file"), "\(run.stderr)")
                #expect(try Data(contentsOf: session) == garbage)
                #expect(CurlQueueTests.files(in: folder) == ["notes.txt"])
                #expect(server.requests.isEmpty)
            }
        }
    }

    /// A session records no URL's user or password nor a secret query value: the store is a
    /// file others read; `status` of the session queue shows none of them.
    @Test func aSessionStoresNoPassword() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let session = folder.appendingPathComponent("batch.session")
                var components = URLComponents(url: server.url("/bytes/300"), resolvingAgainstBaseURL: false)!
                components.user = "alice"
                components.password = "s3ss10n-pw"
                components.query = "token=s3ss10n-tok"
                let url = components.url!.absoluteString
                let run = try await curlq(["get", "--session", session.path, "-d", folder.path, "--progress", "none", url])
                #expect(run.status == 0, "\(run)")
                let status = try await curlq("status", "--store", "sqlite:" + session.path, "--queue", GetSession.queueName)
                #expect(status.stdout.contains("done") && !status.stdout.contains("s3ss10n"), "\(status)")
                for name in try FileManager.default.contentsOfDirectory(atPath: folder.path) where name.hasPrefix("batch.session") {
                    guard let bytes = try? Data(contentsOf: folder.appendingPathComponent(name)) else { continue }  // a folder
                    #expect(bytes.range(of: Data("s3ss10n".utf8)) == nil, "\(name) holds a secret")
                }
            }
        }
    }
}
