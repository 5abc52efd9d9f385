@testable import curlq
import CurlQueue
import CurlQueueDownloads
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Dispatch
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// curlq and `.part` files: when one is resumed and when it starts over, and batches interrupted
/// (SIGINT, SIGKILL) finished byte for byte.
@Suite struct CurlqResumeTests {
    @Test func partFilesStartOverWithoutContinueAndResumeWithIt() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let body = FixtureServer.expectedBytes(count: 200_000)
                let part = folder.appendingPathComponent("200000.part")
                // Without -c, a .part (here of the wrong content) is not trusted: it starts over.
                try Data(repeating: 0xAA, count: 50_000).write(to: part)
                let fresh = try await curlq("get", "-d", folder.path, server.url("/bytes/200000").absoluteString)
                #expect(fresh.status == 0, "\(fresh)")
                #expect(contents(folder.appendingPathComponent("200000")) == body)
                #expect(server.requests.last?.header("Range") == nil)
                #expect(!exists(part))

                // With -c and --overwrite, an existing file is replaced and its .part resumed.
                try Data(body[0..<80_000]).write(to: part)
                let resumed = try await curlq("get", "-c", "--overwrite", "--progress", "lines", "-d", folder.path,
                                              server.url("/bytes/200000").absoluteString)
                #expect(resumed.status == 0, "\(resumed)")
                #expect(server.requests.last?.header("Range") == "bytes=80000-")
                #expect(resumed.stderr.contains("resuming after 78.1 KiB"), "\(resumed.stderr)")
                #expect(contents(folder.appendingPathComponent("200000")) == body)
            }
        }
    }

    /// A `.part` that carries the validator the engine kept with it is resumed without `-c`
    /// (If-Range sent, so a changed file comes whole); `--restart` starts over and says so.
    @Test func aValidatedPartIsResumedByDefaultAndRestartStartsOver() async throws {
        try await withServer { server in
            try await withFolder { folder in
                // Version 1 of each file breaks after 60,000 bytes; with no retries that leaves a
                // .part holding the validator "v1". Every later request gets a newer version.
                for id in ["kept", "redone"] {
                    let url = server.url("/versioned/\(id)?bytes=200000&closeFirst=60000").absoluteString
                    let broken = try await curlq("get", "--retries", "0", "-d", folder.path, url)
                    #expect(broken.status == 1, "\(broken)")
                    let part = folder.appendingPathComponent("\(id).part").path
                    #expect(FileKind.size(part) == 60_000)
                    #expect(FileKind.hasPartValidator(part), "the engine kept no validator with \(part)")
                }

                // No -c: resumed, with If-Range; version 2 differs, so it comes whole and right.
                let resumed = try await curlq("get", "--progress", "lines", "-d", folder.path,
                                              server.url("/versioned/kept?bytes=200000").absoluteString)
                #expect(resumed.status == 0, "\(resumed)")
                #expect(resumed.stderr.contains("(resuming after 58.6 KiB)"), "\(resumed.stderr)")
                let request = try #require(server.requests.last)
                #expect(request.header("Range") == "bytes=60000-" && request.header("If-Range") == "\"v1\"")
                #expect(contents(folder.appendingPathComponent("kept")) == FixtureServer.expectedBytes(offset: 1, count: 200_000))

                // --restart: no Range, and the start line says why.
                let restarted = try await curlq("get", "--restart", "--progress", "lines", "-d", folder.path,
                                                server.url("/versioned/redone?bytes=200000").absoluteString)
                #expect(restarted.status == 0, "\(restarted)")
                #expect(restarted.stderr.contains("(starting over (--restart): discarding 58.6 KiB of .part)"), "\(restarted.stderr)")
                #expect(server.requests.last?.header("Range") == nil)
                #expect(contents(folder.appendingPathComponent("redone")) == FixtureServer.expectedBytes(offset: 1, count: 200_000))

                let both = try await curlq("get", "-c", "--restart", "-d", folder.path, server.url("/bytes/10").absoluteString)
                #expect(both.status == 2 && both.stderr.contains("contradict"), "\(both)")
            }
        }
    }

    /// A `.part` without a validator is not trusted without `-c`: it starts over, saying so.
    @Test func aPartWithoutValidatorStartsOverAndSaysSo() async throws {
        try await withServer { server in
            try await withFolder { folder in
                try Data(repeating: 0xAA, count: 50_000).write(to: folder.appendingPathComponent("80000.part"))
                let run = try await curlq("get", "--progress", "lines", "-d", folder.path, server.url("/bytes/80000").absoluteString)
                #expect(run.status == 0, "\(run)")
                #expect(run.stderr.contains("(starting over: the 48.8 KiB .part has no validator from an earlier curlq run; -c resumes it anyway)"),
                        "\(run.stderr)")
                #expect(server.requests.last?.header("Range") == nil)
                #expect(contents(folder.appendingPathComponent("80000")) == FixtureServer.expectedBytes(count: 80_000))
            }
        }
    }

    /// A server that ignores the Range sends the whole file again: curlq must not report a
    /// resume that did not happen, nor count only the bytes past the old `.part`.
    @Test func aResumeTheServerIgnoredIsNotReportedAsOne() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let body = FixtureServer.expectedBytes(count: 200_000)
                try Data(body[0..<150_000]).write(to: folder.appendingPathComponent("200000.part"))
                let run = try await curlq("get", "-c", "--progress", "lines", "-d", folder.path,
                                          server.url("/bytes/200000?norange=1").absoluteString)
                #expect(run.status == 0, "\(run)")
                #expect(server.requests.last?.header("Range") == "bytes=150000-")
                #expect(contents(folder.appendingPathComponent("200000")) == body)
                #expect(run.stderr.contains("resuming after 146 KiB"), "\(run.stderr)")
                #expect(!run.stderr.contains("(resumed:"), "\(run.stderr)")
                #expect(run.stderr.contains("\n195 KiB received"), "\(run.stderr)")
            }
        }
    }

    @Test func anInterruptedBatchResumesWithContinueByteForByte() async throws {
        try await withServer { server in
            try await withFolder { folder in
                // The slow file holds at 30,000 bytes until gate "slow" opens, which the first
                // run never sees: it is interrupted however busy the machine is.
                let slow = server.url("/bytes/400000?chunk=10000&holdAt=30000&gate=slow").absoluteString
                let arguments = ["get", "-d", folder.path, "-j", "2", "--json", "--progress", "lines",
                                 server.url("/bytes/5000").absoluteString, slow, server.url("/gate/later").absoluteString]
                let process = try CurlqProcess(arguments)
                let part = folder.appendingPathComponent("400000.part")
                // Two chunks of the slow file on disk, and the gate asked for: so the small file is done.
                #expect(await waitForFile(part.path, atLeast: 20_000), "the slow download never started writing")
                try await server.waitForRequests(pathPrefix: "/gate/", count: 1)
                process.send(SIGINT)
                let interrupted = await process.finish()
                #expect(interrupted.status == 130, "\(interrupted)")
                #expect(!interrupted.killedBySignal)
                #expect(interrupted.stderr.contains("Interrupted (SIGINT)"), "\(interrupted.stderr)")
                // The fixture's /bytes sends no validator: a plain rerun would start it over, and the summary says so.
                #expect(interrupted.stderr.contains("Run the same command again to resume them; 1 of them has no validator"), "\(interrupted.stderr)")
                #expect(interrupted.stderr.contains("unless -c resumes it unchecked."), "\(interrupted.stderr)")
                let kept = try #require(contents(part), "no .part kept: \(interrupted)")
                #expect(kept.count >= 20_000 && kept.count <= 30_000)
                #expect(kept == Array(FixtureServer.expectedBytes(count: kept.count)))
                #expect(!exists(folder.appendingPathComponent("400000")), "an incomplete file stands under its final name")
                #expect(files(in: folder) == ["400000.part", "5000"])
                let reports = try interrupted.jsonFiles()
                #expect(try interrupted.json()["interrupted"] as? Bool == true)
                #expect(reports.map { $0["error"] is NSNull } == [true, false, false])
                #expect(reports[1]["bytes"] as? Int == kept.count)

                server.openGate("later")
                server.openGate("slow")
                server.resetStatistics()
                var again = arguments
                again.insert("-c", at: 1)
                let resumed = try await curlq(again)
                #expect(resumed.status == 0, "\(resumed)")
                #expect(resumed.stderr.contains("(resumed: \(Format.bytes(Int64(400_000 - kept.count))) fetched)"), "\(resumed.stderr)")
                #expect(contents(folder.appendingPathComponent("400000")) == FixtureServer.expectedBytes(count: 400_000))
                #expect(contents(folder.appendingPathComponent("later")) == Array("open later".utf8))
                let ranges = server.requests.filter { $0.path == "/bytes/400000" }.map { $0.header("Range") }
                #expect(ranges == ["bytes=\(kept.count)-"], "\(ranges)")
                // A finished file is checked (HEAD: is it the size the server announces?), not fetched again.
                #expect(server.requests.filter { $0.path == "/bytes/5000" }.map(\.method) == ["HEAD"], "a finished file was fetched again")
                #expect(files(in: folder) == ["400000", "5000", "later"])
            }
        }
    }

    /// SIGKILL gives curlq no chance to clean up: whatever it leaves must be `.part` files only,
    /// and `-c` must finish every file byte for byte.
    @Test func aBatchKilledWithSIGKILLCompletesWithContinue() async throws {
        try await withServer { server in
            try await withFolder { folder in
                // Three files that pause at 30,000 bytes until gate "go" opens, two that finish.
                let held = (1...3).map { server.url("/bytes/\(200_000 + $0)?chunk=10000&holdAt=30000&gate=go").absoluteString }
                let quick = (1...2).map { server.url("/bytes/\(5_000 + $0)").absoluteString }
                let arguments = ["get", "-d", folder.path, "-j", "5", "--progress", "none"] + quick + held
                let process = try CurlqProcess(arguments)
                for index in 1...3 {
                    let part = folder.appendingPathComponent("\(200_000 + index).part")
                    #expect(await waitForFile(part.path, atLeast: 20_000), "\(part.lastPathComponent) never started")
                }
                // The two quick files are in place (renamed whole) before the kill, so that the
                // only .part files are the held ones: under ThreadSanitizer a quick file was
                // once still arriving when the held ones had reached 20,000 bytes.
                for index in 1...2 {
                    let done = folder.appendingPathComponent("\(5_000 + index)")
                    #expect(await waitForFile(done.path, atLeast: Int64(5_000 + index)), "\(done.lastPathComponent) never finished")
                }
                process.send(SIGKILL)
                let killed = await process.finish()
                #expect(killed.killedBySignal && killed.status == 128 + SIGKILL, "\(killed)")
                // Only complete files stand under final names; the held ones are .part files.
                for name in files(in: folder) where !name.hasSuffix(".part") {
                    let size = Int(name)!
                    #expect(contents(folder.appendingPathComponent(name)) == FixtureServer.expectedBytes(count: size), "\(name)")
                }
                #expect(files(in: folder).filter { $0.hasSuffix(".part") }.count == 3)

                server.openGate("go")
                server.resetStatistics()
                let resumed = try await curlq(["get", "-c", "-d", folder.path, "-j", "5", "--progress", "none"] + quick + held)
                #expect(resumed.status == 0, "\(resumed)")
                #expect(files(in: folder) == ["200001", "200002", "200003", "5001", "5002"])
                for name in files(in: folder) {
                    #expect(contents(folder.appendingPathComponent(name)) == FixtureServer.expectedBytes(count: Int(name)!), "\(name)")
                }
                // The held files resumed from their .part files, not from 0.
                let ranges = server.requests.filter { $0.path.hasPrefix("/bytes/2000") }.compactMap { $0.header("Range") }
                #expect(ranges.count == 3 && ranges.allSatisfy { $0.hasPrefix("bytes=") && !$0.hasPrefix("bytes=0-") }, "\(ranges)")
            }
        }
    }
}
