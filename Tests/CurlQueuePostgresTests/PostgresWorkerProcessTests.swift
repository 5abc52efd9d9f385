import CurlQueueDurable
import CurlQueuePostgres
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// Durable workers in processes of their own (Tests/DurableWorkerProbe) sharing one PostgreSQL
/// database: killed, stopped and continued. Real processes, the fixture server, real files.
///
/// The tests wait for bytes on disk through inotify (`waitForFile`), and poll the store while
/// workers in other processes change it (`pollStore`: every `StorePoll.interval`, 200 ms, for
/// at most `StorePoll.bound`): no notification crosses processes.
@Suite(.enabled(if: TestPostgres.enabled, "set CQ_POSTGRES_URL (scripts/test-postgres) to run the PostgreSQL tests"))
struct PostgresWorkerProcessTests {
    static let probe = builtProduct("DurableWorkerProbe")

    /// Short leases, so that a takeover happens within seconds: TTL 3 s, a heartbeat every
    /// 0.5 s, the self-fence at 2 s, maintenance (the rescue) every 0.5 s.
    static let shortLeases = [
        "CQ_PROBE_TTL": "3", "CQ_PROBE_HEARTBEAT": "0.5", "CQ_PROBE_SELF_FENCE": "2", "CQ_PROBE_MAINTENANCE": "0.5",
    ]

    func startProbe(_ arguments: [String], output: URL) throws -> Process {
        let process = Process()
        process.executableURL = Self.probe
        process.arguments = arguments
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let handle = try FileHandle(forWritingTo: output)
        process.standardOutput = handle
        process.standardError = handle
        process.environment = ProcessInfo.processInfo.environment
            .merging(Self.shortLeases) { $1 }
            .merging(["SWIFT_BACKTRACE": "enable=no"]) { $1 }
        try process.run()
        try handle.close()
        return process
    }

    /// The handled log the probes write: per job, the (pid, fresh) of each handler call.
    func handlerCalls(_ folder: URL) throws -> [JobID: [(pid: Int32, fresh: Bool)]] {
        let text = (try? String(contentsOf: folder.appendingPathComponent("handled.log"), encoding: .utf8)) ?? ""
        var calls: [JobID: [(pid: Int32, fresh: Bool)]] = [:]
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count == 3, let id = JobID(fields[0]), let pid = Int32(fields[1]) else {
                Issue.record("a malformed line in handled.log: \(line)")
                continue
            }
            calls[id, default: []].append((pid, fields[2] == "fresh"))
        }
        return calls
    }

    /// `(id, state, handled, token)` of every job, read through psql (not through the store under test).
    func rows(_ url: String, where condition: String = "true") throws -> [(id: JobID, state: String, handled: Bool, token: Int64?)] {
        try TestPostgres.psql(url, "SELECT id, state, handled, lease_token FROM cq_job WHERE \(condition) ORDER BY id")
            .split(separator: "\n").map { line in
                let fields = line.split(separator: "|", omittingEmptySubsequences: false)
                return (JobID(fields[0])!, String(fields[1]), fields[2] == "t", Int64(fields[3]))
            }
    }

    /// Three workers drain 5,000 jobs (a real 64-byte GET each); one is `kill -9`'d mid-run.
    ///
    /// What is asserted, and why that is the contract: delivery is at least once and recording
    /// is exactly once per attempt. From the store: every job completed and handled. From the
    /// handlers' log: every job's handler ran at least once; at most one "fresh" run per job (a
    /// fresh run follows a `finish` that recorded: two would be two recorded completions); a job
    /// the victim was running when it died is completed by a survivor (its rescue counted the
    /// attempt: `attempt` 2), with one fresh run, a survivor's; a job with no fresh run is one
    /// whose outcome the victim recorded and whose handler it did not finish (its rescue counted
    /// a handler failure), run again from the record by a survivor; every worker handled a share.
    /// Wall time is not asserted: Benchmarks/ measures speed.
    ///
    /// What the victim held is read from the final rows, not from a snapshot after the kill:
    /// such a snapshot raced with the victim's last statements (a `finish` already sent runs
    /// and commits after its sender died) and with the rescue (3 s after the victim's last
    /// heartbeat), and once named six jobs "without a fresh handler run" that the victim had
    /// recorded after it. The kill itself is made when the victim is known to run jobs: it is
    /// stopped (SIGSTOP), its running rows counted, and killed only when it holds more than its
    /// two connections can still finish; else it goes on and is tried again. (Checking, then
    /// killing a running worker found it between two claims, holding none.)
    @Test(.timeLimit(.minutes(10))) func threeWorkersDrainFiveThousandJobsWhileOneIsKilled() async throws {
        let url = try TestPostgres.freshDatabase()
        try await withServer { server in
            try await withFolder { folder in
                let store = try await PostgresJobStore.open(url: url)
                let total = 5000
                for batch in stride(from: 0, to: total, by: 500) {
                    let specs = (batch..<batch + 500).map {
                        JobSpec(kind: "download", request: JobRequest(url: server.baseURL + "/bytes/64?job=\($0)"))
                    }
                    _ = try await store.enqueue(specs, queue: "default", order: .fifo)
                }
                let workers = try (0..<3).map {
                    try startProbe(["run", url, folder.path, "16"], output: folder.appendingPathComponent("worker\($0).out"))
                }
                defer { for worker in workers where worker.isRunning { kill(worker.processIdentifier, SIGCONT); kill(worker.processIdentifier, SIGKILL) } }
                let victim = workers[2]
                let owner = "lease_owner IN (SELECT id FROM cq_worker WHERE pid = \(victim.processIdentifier))"
                // Mid-run: once a fifth is done, and while the victim, stopped, holds running jobs.
                let midRun = try await pollStore {
                    let completed = try await store.counts(queue: "default")[.completed] ?? 0
                    guard completed >= total / 5 else { return false }
                    kill(victim.processIdentifier, SIGSTOP)
                    // Stopped, it sends nothing more; at most one statement per connection (the
                    // store's two) may still run: more running rows than that, and one at least
                    // is still running when it dies.
                    if try rows(url, where: "\(owner) AND state = 'running'").count > 2 { return true }
                    kill(victim.processIdentifier, SIGCONT)
                    return false
                }
                try #require(midRun, "the workers got a fifth of the jobs done, the victim (stopped) running some")
                kill(victim.processIdentifier, SIGKILL)
                victim.waitUntilExit()
                #expect(victim.terminationReason == .uncaughtSignal)

                for worker in workers.prefix(2) {
                    #expect(try await waitForExit(of: worker, within: .seconds(300)) == 0, "a survivor drains the queue and exits")
                }

                let final = try TestPostgres.psql(url, "SELECT id, state, handled, attempt, handler_failures FROM cq_job ORDER BY id")
                    .split(separator: "\n").map { line in
                        let fields = line.split(separator: "|", omittingEmptySubsequences: false)
                        return (id: JobID(fields[0])!, state: String(fields[1]), handled: fields[2] == "t",
                                attempt: Int(fields[3])!, handlerFailures: Int(fields[4])!)
                    }
                #expect(final.count == total)
                #expect(final.allSatisfy { $0.state == "completed" && $0.handled }, "every job completed and handled")
                let calls = try handlerCalls(folder)
                let survivors = Set(workers.prefix(2).map(\.processIdentifier))
                for job in final {
                    let runs = calls[job.id] ?? []
                    #expect(!runs.isEmpty, "job \(job.id): its handler ran")
                    #expect(runs.filter(\.fresh).count <= 1, "job \(job.id): recorded once, not \(runs.filter(\.fresh).count) times")
                }
                // Taken over while running: the rescue counted the victim's attempt.
                let takenOver = final.filter { $0.attempt > 1 }
                #expect(!takenOver.isEmpty, "the victim's running jobs were rescued and run again")
                for job in takenOver {
                    let fresh = (calls[job.id] ?? []).filter(\.fresh)
                    #expect(fresh.count == 1 && survivors.contains(fresh[0].pid), "job \(job.id) taken over by a survivor: \(calls[job.id] ?? [])")
                }
                // Recorded by the victim, its handler not finished: the rescue counted a handler failure.
                let recordedByTheVictim = Set(final.filter { $0.handlerFailures > 0 }.map(\.id))
                for job in final where !recordedByTheVictim.contains(job.id) {
                    #expect((calls[job.id] ?? []).filter(\.fresh).count == 1, "job \(job.id): one fresh handler run: \(calls[job.id] ?? [])")
                }
                for id in recordedByTheVictim {
                    #expect((calls[id] ?? []).contains { !$0.fresh && survivors.contains($0.pid) },
                            "job \(id): recorded by the victim, its handler run again from the record: \(calls[id] ?? [])")
                }
                for worker in workers {
                    let share = calls.values.reduce(0) { $0 + $1.filter { $0.fresh && $0.pid == worker.processIdentifier }.count }
                    #expect(share > 0, "worker \(worker.processIdentifier) took a share")
                }
                let requested = Set(server.requests.compactMap { $0.uri.split(separator: "job=").last.flatMap { Int($0) } })
                #expect(requested.count == total, "a real transfer for every job")
                await store.close()
            }
        }
    }

    /// A worker stopped (SIGSTOP) past its lease in the middle of a slow download: another
    /// worker takes the job over and completes it; the stopped one, continued (SIGCONT),
    /// records nothing, stops its transfer, and its `.part` does not clobber the finished file.
    @Test(.timeLimit(.minutes(3))) func aWorkerStoppedPastItsLeaseIsFencedAndStopsItsTransfer() async throws {
        let url = try TestPostgres.freshDatabase()
        try await withServer { server in
            try await withFolder { folder in
                let store = try await PostgresJobStore.open(url: url)
                // 64 MiB at 32 KiB per 5 ms (about 6.5 MB/s at most): 10 s or more for a whole transfer.
                let size = 64 << 20
                let spec = JobSpec(kind: "download", request: JobRequest(
                    url: server.baseURL + "/bytes/\(size)?chunk=32768&drip=5&job=slow", destination: "slow.bin"))
                let id = try await store.enqueue([spec], queue: "default", order: .fifo)[0].id
                let file = folder.appendingPathComponent("slow.bin")
                let part = file.path + ".part"
                // An earlier attempt's 512 KiB: the first worker resumes it, appending (a writer
                // that does not append would write the same bytes at the same offsets as the other
                // and hide an overlap).
                try Data(FixtureServer.expectedBytes(count: 512 << 10)).write(to: URL(fileURLWithPath: part))
                let paused = try startProbe(["run", url, folder.path, "1"], output: folder.appendingPathComponent("paused.out"))
                defer { if paused.isRunning { kill(paused.processIdentifier, SIGCONT); kill(paused.processIdentifier, SIGKILL) } }
                try #require(await waitForFile(part, atLeast: 2 << 20, timeout: 60), "the first worker's download is under way")
                kill(paused.processIdentifier, SIGSTOP)
                let staleToken = try #require(try rows(url).first?.token)
                let firstConnection = try #require(server.requests.first { $0.uri.hasSuffix("job=slow") }?.connectionID)

                let other = try startProbe(["run", url, folder.path, "1"], output: folder.appendingPathComponent("other.out"))
                #expect(try await waitForExit(of: other, within: .seconds(120)) == 0, "the other worker completes the job and exits")
                let record = try #require(try await store.jobs(JobFilter(ids: [id])).first)
                #expect(record.state == .completed && record.handled)
                let token = try #require(try rows(url).first?.token)
                #expect(token != staleToken, "completed under a new token")
                // The stopped worker still has its .part open (and locked): the other one started
                // a file of its own instead of appending to that one.
                let takeover = server.requests.filter { $0.uri.hasSuffix("job=slow") }.dropFirst().first
                #expect(takeover != nil && takeover?.header("Range") == nil, "not resumed from the stopped worker's .part")

                // Continued: its heartbeat finds it dead; it cancels the transfer (the server sees
                // the connection closed long before the rest could have arrived: at most 2 MiB on disk
                // and a few in the sockets' buffers when it stopped, 56 MiB or more to go) and exits.
                kill(paused.processIdentifier, SIGCONT)
                let closed = await withTaskGroup(of: Bool.self) { group in
                    group.addTask { await server.waitUntilConnectionClosed(firstConnection); return true }
                    group.addTask {
                        try? await Task.sleep(for: .seconds(4))  // the sleep IS the time limit: 56 MiB take 8.5 s or more
                        return false
                    }
                    let first = await group.next() ?? false
                    group.cancelAll()
                    return first
                }
                #expect(closed, "the continued worker closed its transfer's connection")
                #expect(try await waitForExit(of: paused, within: .seconds(60)) == 0)

                // Nothing of the stopped worker's is recorded or on disk under the final name.
                let calls = try handlerCalls(folder)
                #expect(calls[id]?.map(\.pid) == [other.processIdentifier] && calls[id]?.first?.fresh == true,
                        "one handler run, the other worker's: \(calls[id] ?? [])")
                let after = try #require(try await store.jobs(JobFilter(ids: [id])).first)
                #expect(after.outcome == record.outcome && after.state == .completed)
                guard case .completed(let result)? = after.outcome else { return }
                #expect(result.bytes == Int64(size))
                let data = try Data(contentsOf: file)
                #expect(data.count == size && data == Data(FixtureServer.expectedBytes(count: size)), "slow.bin byte-identical")
                #expect(!FileManager.default.fileExists(atPath: part))
                await store.close()
            }
        }
    }
}
