import CurlQueue
import CurlQueueDurable
import CurlQueueSQLite
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// Durable workers in processes of their own, killed and started again: real processes, a
/// real SQLite file, the fixture server, real files.
@Suite struct DurableWorkerProcessTests {
    static let probe = builtProduct("DurableWorkerProbe")

    func startProbe(_ arguments: [String], environment: [String: String] = [:]) throws -> Process {
        let process = Process()
        process.executableURL = Self.probe
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        // The poison job aborts the probe on purpose: no backtrace in the test log for it.
        process.standardError = FileHandle.nullDevice
        process.environment = ProcessInfo.processInfo.environment.merging(["SWIFT_BACKTRACE": "enable=no"]) { $1 }
            .merging(environment) { $1 }
        try process.run()
        return process
    }

    /// The worker's exit status; one that does not finish within `timeout` is killed and reported.
    func exitStatus(_ process: Process, timeout: Duration = .seconds(120)) async throws -> Int32 {
        guard let status = try await waitForExit(of: process, within: timeout) else {
            Issue.record("the worker did not finish within \(timeout)")
            return -1
        }
        return status
    }

    @Test func killedMidBatchThenRestartedCompletesEveryJobOnceWithResume() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let database = folder.appendingPathComponent("jobs.sqlite").path
                let downloads = folder.appendingPathComponent("files")
                try FileManager.default.createDirectory(at: downloads, withIntermediateDirectories: true)
                let store = try SQLiteJobStore(path: database)
                var generator = SeededGenerator(seed: UInt64(Date().timeIntervalSince1970))
                let sizes = (0..<12).map { _ in Int.random(in: 1 << 20...4 << 20, using: &generator) }
                let specs = sizes.enumerated().map { index, size in
                    JobSpec(kind: "download",
                            request: JobRequest(url: server.baseURL + "/bytes/\(size)?chunk=32768&drip=10&job=\(index)",
                                                destination: "f\(index).bin"))
                }
                let ids = try await store.enqueue(specs, queue: "default", order: .fifo).map(\.id)
                @Sendable func partSizes() -> [String: Int] {
                    let names = (try? FileManager.default.contentsOfDirectory(atPath: downloads.path)) ?? []
                    var sizes: [String: Int] = [:]
                    for name in names where name.hasSuffix(".part") {
                        sizes[name] = (try? FileManager.default.attributesOfItem(atPath: downloads.path + "/" + name)[.size] as? Int) ?? 0
                    }
                    return sizes
                }
                // Two kills, each once this run of the worker has written 256 KiB more of some file.
                for _ in 0..<2 {
                    let before = partSizes()
                    let worker = try startProbe(["run", database, downloads.path, "4"])
                    let partial = await waitForFolder(downloads, timeout: 60) {
                        partSizes().contains { $0.value > (before[$0.key] ?? 0) + 256 * 1024 }
                    }
                    #expect(partial, "a download was under way")
                    usleep(UInt32.random(in: 0..<300_000, using: &generator))  // the sleep IS the event: a random moment to kill at
                    kill(worker.processIdentifier, SIGKILL)
                    worker.waitUntilExit()
                    #expect(worker.terminationReason == .uncaughtSignal)
                }
                // A .part killed before its first byte holds nothing to resume: it is fetched whole.
                let interruptedSizes = partSizes().filter { $0.value > 0 }
                let interrupted = Set(interruptedSizes.keys.map { String($0.dropLast(5)) })
                #expect(!interrupted.isEmpty)
                let last = try startProbe(["run", database, downloads.path, "4"])
                #expect(try await exitStatus(last) == 0)

                let records = try await store.jobs(JobFilter(limit: 100))
                #expect(records.count == ids.count)
                for record in records {
                    #expect(record.state == .completed, "job \(record.id): \(record.lastError ?? "")")
                    #expect(record.handled)
                    guard case .completed(let result)? = record.outcome else { continue }
                    let index = Int(record.spec.request.destination!.dropFirst().dropLast(4))!
                    #expect(result.bytes == Int64(sizes[index]))
                    let data = try Data(contentsOf: downloads.appendingPathComponent(record.spec.request.destination!))
                    #expect(data == Data(FixtureServer.expectedBytes(count: sizes[index])), "f\(index).bin byte-identical")
                }
                // The interrupted downloads were resumed with Range, not fetched again whole.
                for name in interrupted {
                    let index = name.dropFirst().dropLast(4)
                    let ranged = server.requests.filter { $0.uri.hasSuffix("job=\(index)") }
                        .contains { $0.headers.contains { $0.name.lowercased() == "range" } }
                    #expect(ranged, "\(name) resumed with Range (its .part held \(interruptedSizes[name + ".part"] ?? 0) bytes)")
                }
                #expect(try !FileManager.default.contentsOfDirectory(atPath: downloads.path).contains { $0.hasSuffix(".part") })
            }
        }
    }

    @Test func aJobThatKillsItsWorkerEachTimeFailsAfterItsAttempts() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let database = folder.appendingPathComponent("jobs.sqlite").path
                let store = try SQLiteJobStore(path: database)
                let poison = JobSpec(kind: "download", request: JobRequest(url: server.baseURL + "/bytes/10"),
                                     retry: JobRetryPolicy(maxAttempts: 2), credential: "crash")
                let fine = JobSpec(kind: "download", request: JobRequest(url: server.baseURL + "/bytes/20", destination: "ok.bin"),
                                   priority: .low)
                let ids = try await store.enqueue([poison, fine], queue: "default", order: .fifo).map(\.id)
                var statuses: [Int32] = []
                for _ in 0..<4 {  // bounded: two crashes, then a run that finishes
                    let status = try await exitStatus(try startProbe(["run", database, folder.path, "1"]))
                    statuses.append(status)
                    if status == 0 { break }
                }
                #expect(statuses.count == 3 && statuses.last == 0, "\(statuses)")
                let records = Dictionary(uniqueKeysWithValues: try await store.jobs(JobFilter()).map { ($0.id, $0) })
                #expect(records[ids[0]]?.state == .failed)
                #expect(records[ids[0]]?.attempt == 2)
                #expect(records[ids[1]]?.state == .completed)
            }
        }
    }

    @Test func aJobWhoseHandlerKillsItsWorkerEachTimeFailsAfterItsAttempts() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let database = folder.appendingPathComponent("jobs.sqlite").path
                let store = try SQLiteJobStore(path: database)
                let poison = JobSpec(kind: "download", request: JobRequest(url: server.baseURL + "/bytes/10"),
                                     retry: JobRetryPolicy(maxAttempts: 2), metadata: ["handler": "crash"])
                let fine = JobSpec(kind: "download", request: JobRequest(url: server.baseURL + "/bytes/20"), priority: .low)
                let ids = try await store.enqueue([poison, fine], queue: "default", order: .fifo).map(\.id)
                var statuses: [Int32] = []
                for _ in 0..<5 {  // bounded: two deaths in the handler, then a run that finishes
                    let status = try await exitStatus(try startProbe(["run", database, folder.path, "1"]))
                    statuses.append(status)
                    if status == 0 { break }
                }
                #expect(statuses.count == 3 && statuses.last == 0, "\(statuses)")
                let records = Dictionary(uniqueKeysWithValues: try await store.jobs(JobFilter()).map { ($0.id, $0) })
                #expect(records[ids[0]]?.state == .failed && records[ids[0]]?.handled == true)
                #expect(records[ids[0]]?.attempt == 1, "the transfer ran once")
                #expect(records[ids[0]]?.lastError == JobOutcome.handlerFailedReason)
                #expect(records[ids[1]]?.state == .completed && records[ids[1]]?.handled == true)
                let handledLog = (try? String(contentsOf: folder.appendingPathComponent("handled.log"), encoding: .utf8)) ?? ""
                #expect(!handledLog.split(separator: "\n").contains { $0.split(separator: " ").first == Substring(String(ids[0])) },
                        "the poison handler never returned")
            }
        }
    }

    @Test func aKilledWorkersJobsAreRescuedAtOnceThroughItsLockNotAfterTheTTL() async throws {
        try await withFolder { folder in
            let database = folder.appendingPathComponent("jobs.sqlite").path
            let store = try SQLiteJobStore(path: database)  // TTL 60 s; the clock does not move
            let specs = (0..<2).map { JobSpec(kind: "download", request: JobRequest(url: "http://127.0.0.1:9/\($0)")) }
            _ = try await store.enqueue(specs, queue: "default", order: .fifo)
            let holder = try startProbe(["hold", database])
            // A poll: the holder, another process, changes the store (no notification crosses processes).
            let held = try await pollStore { try await store.counts(queue: "default")[.running] == 2 }
            #expect(held)
            #expect(try await store.maintain().rescued == 0, "alive: its lock is held")
            kill(holder.processIdentifier, SIGKILL)
            holder.waitUntilExit()
            let report = try await store.maintain()
            #expect(report.rescued == 2 && report.deadWorkers.count == 1, "rescued at once, within the TTL")
            #expect(try await store.counts(queue: "default") == [.available: 2])
        }
    }

    /// On SQLite a stopped (SIGSTOP) worker keeps its `flock`, so it counts as alive however
    /// long it is stopped: past its TTL no `maintain()` rescues its job. Continued (SIGCONT)
    /// past its self-fence, it stops the transfer and records nothing, then gives the job back
    /// (the store still counts it as its own) and the job completes, resumed, once. Without the
    /// give-back the job stayed `running` under a live worker for ever.
    @Test func aStoppedWorkerKeepsItsLockAndItsJobThenGivesItBackWhenContinued() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let database = folder.appendingPathComponent("jobs.sqlite").path
                let store = try SQLiteJobStore(path: database)
                let size = 16 << 20  // at 32 KiB per 5 ms: 2.5 s or more
                let id = try await store.enqueue(
                    [JobSpec(kind: "download", request: JobRequest(
                        url: server.baseURL + "/bytes/\(size)?chunk=32768&drip=5", destination: "slow.bin"))],
                    queue: "default", order: .fifo)[0].id
                let part = folder.appendingPathComponent("slow.bin.part").path
                let leases = ["CQ_PROBE_TTL": "2", "CQ_PROBE_HEARTBEAT": "0.5", "CQ_PROBE_SELF_FENCE": "1.5"]
                let worker = try startProbe(["run", "sqlite:" + database, folder.path, "1"],
                                            environment: leases)
                defer { if worker.isRunning { kill(worker.processIdentifier, SIGCONT); kill(worker.processIdentifier, SIGKILL) } }
                try #require(await waitForFile(part, atLeast: 1 << 20, timeout: 60), "the download is under way")
                kill(worker.processIdentifier, SIGSTOP)
                try await Task.sleep(for: .seconds(3))  // the sleep IS the event: the 2 s TTL passing
                let report = try await store.maintain()
                #expect(report.rescued == 0 && report.deadWorkers.isEmpty, "alive through its lock, past its TTL")
                #expect(try await store.counts(queue: "default") == [.running: 1])

                kill(worker.processIdentifier, SIGCONT)
                #expect(try await exitStatus(worker, timeout: .seconds(60)) == 0, "the job completes and the worker exits")
                let record = try #require(try await store.jobs(JobFilter(ids: [id])).first)
                #expect(record.state == .completed && record.handled, "\(record.state) \(record.lastError ?? "")")
                #expect(record.attempt == 1, "given back, not counted as a failed attempt")
                let data = try Data(contentsOf: folder.appendingPathComponent("slow.bin"))
                #expect(data == Data(FixtureServer.expectedBytes(count: size)), "slow.bin byte-identical")
                let requests = server.requests.filter { $0.path == "/bytes/\(size)" }
                #expect(requests.count == 2 && requests[1].headers.contains { $0.name.lowercased() == "range" },
                        "resumed with Range after the give-back")
                let log = try String(contentsOf: folder.appendingPathComponent("handled.log"), encoding: .utf8)
                #expect(log == "\(id) \(worker.processIdentifier) fresh\n", "recorded and handled once")
            }
        }
    }

    @Test func twoProcessesOpeningAnEmptyFileCreateTheSchemaOnce() async throws {
        try await withFolder { folder in
            for round in 0..<5 {
                let database = folder.appendingPathComponent("jobs\(round).sqlite").path
                let first = try startProbe(["open", database])
                let second = try startProbe(["open", database])
                #expect(try await exitStatus(first) == 0)
                #expect(try await exitStatus(second) == 0)
                let store = try SQLiteJobStore(path: database)
                let id = try await store.enqueue([JobSpec(kind: "k", request: JobRequest(url: "http://127.0.0.1/x"))],
                                                 queue: "q", order: .fifo)[0].id
                #expect(id == 1)
            }
        }
    }
}
