import CurlQueueDurable
@testable import CurlQueueSQLite
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// `curlq enqueue | daemon | status | cancel` as a user runs them: the built executable, a
/// store file, the fixture server.
@Suite struct CurlqDurableTests {
    static let curlq = builtProduct("curlq")

    func curlq(_ arguments: [String]) async throws -> (output: String, status: Int32) {
        let process = Process()
        process.executableURL = Self.curlq
        process.arguments = arguments
        process.standardError = FileHandle.nullDevice
        return try await runToEnd(process)
    }

    /// `curlq status --json`; a store file that is not there (nothing was ever stored) has no jobs.
    func status(_ store: String) async throws -> [String: Any] {
        let path = store.hasPrefix("sqlite:") ? String(store.dropFirst("sqlite:".count)) : store
        if !store.hasPrefix("postgres"), !FileManager.default.fileExists(atPath: path) { return ["counts": [String: Int]()] }
        let output = try await curlq(["status", "--store", store, "--json"]).output
        return try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any] ?? [:]
    }

    /// Polls `curlq status` until `done` holds for its counts (a poll: the daemon, another
    /// process, changes the store, and SQLite has no cross-process notification).
    func waitForCounts(_ store: String, _ done: ([String: Int]) -> Bool) async throws -> Bool {
        try await pollStore { done(try await status(store)["counts"] as? [String: Int] ?? [:]) }
    }

    /// The process's exit status; one that does not exit within `timeout` is killed and reported.
    func exitStatus(_ process: Process, timeout: Duration) async throws -> Int32 {
        guard let status = try await waitForExit(of: process, within: timeout) else {
            Issue.record("curlq did not exit within \(timeout)")
            return -1
        }
        return status
    }

    @Test func aDaemonStoppedWithSIGTERMGivesJobsBackAndTheNextOneResumesThem() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let store = "sqlite:" + folder.appendingPathComponent("jobs.db").path
                let files = folder.appendingPathComponent("files")
                let size = 2 << 20
                let urls = (0..<2).map { server.baseURL + "/bytes/\(size + $0)?chunk=16384&drip=40" }  // two names
                let enqueued = try await curlq(["enqueue", "--store", store] + urls)
                #expect(enqueued.status == 0)
                #expect(enqueued.output == "1\n2\n")

                func startDaemon() throws -> Process {
                    let daemon = Process()
                    daemon.executableURL = Self.curlq
                    daemon.arguments = ["daemon", "--store", store, "-d", files.path, "-j", "2", "--drain-timeout", "0", "-q"]
                    try daemon.run()
                    return daemon
                }
                let first = try startDaemon()
                let started = await waitForFolder(files) { names(in: files).filter { $0.hasSuffix(".part") }.count == 2 }
                #expect(started)
                kill(first.processIdentifier, SIGTERM)
                #expect(try await exitStatus(first, timeout: .seconds(30)) == 0, "drained and exited")
                let afterStop = try await status(store)
                #expect(afterStop["counts"] as? [String: Int] == ["waiting": 2], "given back, none left running")
                let jobs = afterStop["jobs"] as? [[String: Any]] ?? []
                #expect(jobs.allSatisfy { $0["attempt"] as? Int == 0 })

                let second = try startDaemon()
                let finished = try await waitForCounts(store) { $0 == ["done": 2] }
                kill(second.processIdentifier, SIGTERM)
                #expect(try await exitStatus(second, timeout: .seconds(30)) == 0)
                #expect(finished)
                for url in urls {
                    let ranged = server.requests.filter { url.hasSuffix($0.uri) }
                        .contains { $0.headers.contains { $0.name.lowercased() == "range" } }
                    #expect(ranged, "\(url) resumed with Range")
                }
            }
        }
    }

    @Test func enqueuePassesTheInputFilesChecksumsToTheJobs() async throws {
        try await withFolder { folder in
            let path = folder.appendingPathComponent("jobs.db").path
            let input = folder.appendingPathComponent("urls.txt")
            let digest = String(repeating: "ab", count: 32)
            try "http://127.0.0.1:9/a\n    sha256=\(digest.uppercased())\nhttp://127.0.0.1:9/b\n    md5=\(String(repeating: "c", count: 32))\nhttp://127.0.0.1:9/c\n"
                .write(to: input, atomically: true, encoding: .utf8)
            let enqueued = try await curlq(["enqueue", "--store", "sqlite:" + path, "-i", input.path])
            #expect(enqueued.status == 0)
            let jobs = try await SQLiteJobStore(path: path).jobs(JobFilter()).sorted { $0.id < $1.id }
            #expect(jobs.map(\.spec.request.checksum) == [
                .init(algorithm: "sha256", hex: digest), .init(algorithm: "md5", hex: String(repeating: "c", count: 32)), nil,
            ])
        }
    }

    @Test func enqueueRefusesSecretsAndCancelTakesIdsAndURLs() async throws {
        try await withFolder { folder in
            let store = "sqlite:" + folder.appendingPathComponent("jobs.db").path
            let input = folder.appendingPathComponent("urls.txt")
            try "http://127.0.0.1:9/a\n    header=Authorization: Bearer s3cr3t\nhttp://127.0.0.1:9/b\n".write(to: input, atomically: true, encoding: .utf8)
            let refused = try await curlq(["enqueue", "--store", store, "-i", input.path])
            #expect(refused.status == 2)
            #expect(try await status(store)["counts"] as? [String: Int] == [:], "nothing stored")

            #expect(try await curlq(["enqueue", "--store", store, "http://127.0.0.1:9/a", "http://127.0.0.1:9/b"]).status == 0)
            let byID = try await curlq(["cancel", "--store", store, "1"])
            #expect(byID.output == "1 cancelled\n")
            let byURL = try await curlq(["cancel", "--store", store, "http://127.0.0.1:9/b"])
            #expect(byURL.output == "2 cancelled\n")
            #expect(try await curlq(["cancel", "--store", store, "3"]).status == 1, "nothing to cancel")
            #expect(try await status(store)["counts"] as? [String: Int] == ["cancelled": 2])
        }
    }

    // MARK: - PostgreSQL (--store postgres://…)

    /// The PostgreSQL that scripts/test starts (scripts/test-postgres); unset, these tests are
    /// skipped, except under CI, where they run and fail saying so.
    static let postgresURL = ProcessInfo.processInfo.environment["CQ_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
    static let postgresEnabled = postgresURL != nil || ProcessInfo.processInfo.environment["CI"] == "true"

    /// A new, empty database on that server (made with psql), so that tests never share jobs.
    func freshPostgresDatabase() async throws -> String {
        let url = try #require(Self.postgresURL, "CQ_POSTGRES_URL is unset under CI: scripts/test must start PostgreSQL")
        let name = "cq_curlq_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16)
        let psql = Process()
        psql.executableURL = URL(fileURLWithPath: "/usr/bin/psql")
        psql.arguments = ["-X", "-q", "-v", "ON_ERROR_STOP=1", url, "-c", "CREATE DATABASE \(name)"]
        psql.standardError = FileHandle.nullDevice
        #expect(try await runToEnd(psql).status == 0)
        let slash = try #require(url.range(of: "/", options: .backwards))
        return String(url[..<slash.lowerBound]) + "/" + name
    }

    /// `curlq arguments…` to its end, with its standard error too.
    func curlqWithError(_ arguments: [String], in folder: URL) async throws -> (output: String, error: String, status: Int32) {
        let errorFile = folder.appendingPathComponent("stderr-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: errorFile.path, contents: nil)
        let handle = try FileHandle(forWritingTo: errorFile)
        let process = Process()
        process.executableURL = Self.curlq
        process.arguments = arguments
        process.standardError = handle
        let (output, status) = try await runToEnd(process)
        try handle.close()
        return (output, try String(contentsOf: errorFile, encoding: .utf8), status)
    }

    @Test(.enabled(if: postgresEnabled, "CQ_POSTGRES_URL is unset: run through scripts/test-postgres (or scripts/test)"))
    func aDaemonOnPostgresRunsEnqueuedDownloadsAndStatusAndCancelWork() async throws {
        let store = try await freshPostgresDatabase()
        try await withServer { server in
            try await withFolder { folder in
                let files = folder.appendingPathComponent("files")
                let urls = [1000, 70_000, 3000, 4000].map { server.baseURL + "/bytes/\($0)" }
                let enqueued = try await curlq(["enqueue", "--store", store] + urls)
                #expect(enqueued.status == 0)
                #expect(enqueued.output == "1\n2\n3\n4\n")
                #expect(try await curlq(["cancel", "--store", store, "3"]).output == "3 cancelled\n")
                #expect(try await curlq(["cancel", "--store", store, urls[3]]).output == "4 cancelled\n")
                #expect(try await curlq(["cancel", "--store", store, "3"]).status == 1, "nothing left to cancel")
                #expect(try await status(store)["counts"] as? [String: Int] == ["waiting": 2, "cancelled": 2])

                let daemon = Process()
                daemon.executableURL = Self.curlq
                daemon.arguments = ["daemon", "--store", store, "-d", files.path, "-j", "2", "-q"]
                try daemon.run()
                let finished = try await waitForCounts(store) { $0 == ["done": 2, "cancelled": 2] }
                kill(daemon.processIdentifier, SIGTERM)
                #expect(try await exitStatus(daemon, timeout: .seconds(30)) == 0, "drained and exited")
                #expect(finished)
                let report = try await status(store)
                let jobs = report["jobs"] as? [[String: Any]] ?? []
                #expect(jobs.count == 4)
                for job in jobs where job["state"] as? String == "done" {
                    #expect(job["attempt"] as? Int == 1)
                }
                for size in [1000, 70_000] {
                    let data = try Data(contentsOf: files.appendingPathComponent("\(size)"))
                    #expect(data == Data(FixtureServer.expectedBytes(count: size)), "\(size) byte-identical")
                }
                #expect(!exists(files.appendingPathComponent("3000")) && !exists(files.appendingPathComponent("4000")), "cancelled: never fetched")
            }
        }
    }

    @Test func aBadPostgresURLIsAUsageErrorAndADownServerAFailureNeitherShowingThePassword() async throws {
        try await withFolder { folder in
            let bad = try await curlqWithError(["status", "--store", "postgres://cq:s3cr3t@127.0.0.1:notaport/jobs"], in: folder)
            #expect(bad.status == 2, "\(bad.error)")
            #expect(bad.error.hasPrefix("curlq: error: --store postgres://cq:***@127.0.0.1:notaport/jobs: invalid PostgreSQL URL: "), "\(bad.error)")
            #expect(!bad.error.contains("s3cr3t"))
            let unknown = try await curlqWithError(["enqueue", "--store", "postgresql://cq:s3cr3t@127.0.0.1/jobs?nosuch=1", "http://127.0.0.1:9/a"], in: folder)
            #expect(unknown.status == 2, "\(unknown.error)")
            #expect(unknown.error.contains("invalid PostgreSQL URL: invalid URI query parameter: \"nosuch\""), "\(unknown.error)")
            #expect(!unknown.error.contains("s3cr3t"))
            let sslmode = try await curlqWithError(["status", "--store", "postgres://cq:s3cr3t@127.0.0.1/jobs?sslmode=bogus"], in: folder)
            #expect(sslmode.status == 2 && sslmode.error.contains("sslmode=bogus is not one of"), "\(sslmode.error)")

            let port = try await unusedPort()
            let down = "postgres://cq:s3cr3t@127.0.0.1:\(port)/jobs"
            for arguments in [["enqueue", "--store", down, "http://127.0.0.1:9/a"], ["status", "--store", down],
                              ["cancel", "--store", down, "1"], ["daemon", "--store", down, "-d", folder.path]] {
                let run = try await curlqWithError(arguments, in: folder)
                #expect(run.status == 1, "\(arguments[0]): \(run.error)")
                #expect(run.error.hasPrefix("curlq: error: cannot open the store postgres://cq:***@127.0.0.1:\(port)/jobs: PostgreSQL unavailable: "),
                        "\(arguments[0]): \(run.error)")
                #expect(!run.error.contains("s3cr3t"))
                #expect(run.output.isEmpty)
            }
            let inQuery = try await curlqWithError(["status", "--store", "postgresql://cq@127.0.0.1:\(port)/jobs?password=s3cr3t"], in: folder)
            #expect(inQuery.status == 1, "\(inQuery.error)")
            #expect(inQuery.error.contains("password=***"), "\(inQuery.error)")
            #expect(!inQuery.error.contains("s3cr3t"))
        }
    }

    // MARK: - The store's edges (issue 30, point 5)

    /// `status` and `cancel` on a store file that is not there: exit 2, nothing created.
    @Test func statusAndCancelOfAMissingStoreCreateNothing() async throws {
        try await withFolder { folder in
            let path = folder.appendingPathComponent("typo.db").path
            for arguments in [["status", "--store", "sqlite:" + path], ["cancel", "--store", path, "1"]] {
                let run = try await curlqWithError(arguments, in: folder)
                #expect(run.status == 2 && run.error.contains("there is no store at"), "\(arguments): \(run.error)")
                #expect(!FileManager.default.fileExists(atPath: path), "\(arguments[0]) created \(path)")
            }
        }
    }

    /// Nothing secret is stored: a URL's user and password and a secret query parameter are
    /// refused (the latter stored with --allow-secret-query, and hidden by status); a bad port
    /// is refused as by get; nothing of a refused command is enqueued.
    @Test func enqueueKeepsSecretsAndBadURLsOutOfTheStore() async throws {
        try await withFolder { folder in
            let path = folder.appendingPathComponent("jobs.db").path
            let store = "sqlite:" + path
            let refused = [
                ["http://alice:s3cret@127.0.0.1:9/a"], ["http://127.0.0.1:9/a?token=s3cret"],
                ["-H", "X-Api-Key: s3cret", "http://127.0.0.1:9/a"], ["http://127.0.0.1:99999/x"],
            ]
            for arguments in refused {
                let run = try await curlqWithError(["enqueue", "--store", store] + arguments, in: folder)
                #expect(run.status == 2, "\(arguments): \(run.error)")
                #expect(!run.error.contains("s3cret"), "\(run.error)")
            }
            #expect(try await status(store)["counts"] as? [String: Int] == [:], "nothing stored")
            let signed = try await curlqWithError(["enqueue", "--store", store, "--allow-secret-query", "http://127.0.0.1:9/a?sig=s3cret"], in: folder)
            #expect(signed.status == 0, "\(signed.error)")
            let shown = try await curlqWithError(["status", "--store", store], in: folder)
            #expect(shown.output.contains("sig=REDACTED") && !shown.output.contains("s3cret"), "\(shown.output)")
            let json = try await curlqWithError(["status", "--store", store, "--json"], in: folder)
            #expect(!json.output.contains("s3cret"), "\(json.output)")
        }
    }

    /// Another application's SQLite database is not made a store: refused, unchanged.
    @Test func anotherApplicationsDatabaseIsRefused() async throws {
        try await withFolder { folder in
            let path = folder.appendingPathComponent("app.db").path
            let connection = try SQLiteConnection(path: path, busyTimeoutMilliseconds: 1000)
            try connection.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
            let before = try Data(contentsOf: URL(fileURLWithPath: path))
            for arguments in [["enqueue", "--store", "sqlite:" + path, "http://127.0.0.1:9/a"], ["status", "--store", path]] {
                let run = try await curlqWithError(arguments, in: folder)
                #expect(run.status == 2 && run.error.contains("not a curlq job store"), "\(arguments[0]): \(run.error)")
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "unchanged")
            #expect(try connection.query("SELECT name FROM sqlite_schema WHERE name LIKE 'cq%'").isEmpty)
        }
    }
}
