import Foundation
import Testing

/// The PostgreSQL that scripts/test starts (scripts/test-postgres): its URL comes from
/// CQ_POSTGRES_URL. Without it the PostgreSQL tests are skipped with a printed reason, except
/// under CI (CI=true), where they run and fail at once saying it is unset: CI never skips them.
enum TestPostgres {
    static let url = ProcessInfo.processInfo.environment["CQ_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
    static let underCI = ProcessInfo.processInfo.environment["CI"] == "true"

    /// The suites' `.enabled(if:)`: on when there is a server, and always under CI.
    static let enabled = url != nil || underCI

    /// The server's URL, or a failure that says why there is none.
    static func requireURL() throws -> String {
        try #require(url, "CQ_POSTGRES_URL is unset under CI: scripts/test must start PostgreSQL (scripts/test-postgres)")
    }

    /// A new, empty database on the shared server, so that tests running in parallel never see
    /// each other's jobs. Returns its URL.
    static func freshDatabase() throws -> String {
        let url = try requireURL()
        let name = "cq_test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16)
        try psql(url, "CREATE DATABASE \(name)")
        return replacingDatabase(in: url, with: String(name))
    }

    static func replacingDatabase(in url: String, with name: String) -> String {
        guard let slash = url.range(of: "/", options: .backwards), !url[..<slash.lowerBound].hasSuffix("/") else {
            return url + "/" + name
        }
        return String(url[..<slash.lowerBound]) + "/" + name
    }

    /// Runs SQL through `psql` (a second, independent client: what the tests check is read
    /// through it, not through the store under test).
    @discardableResult
    static func psql(_ url: String, _ sql: String) throws -> String {
        let result = try run("/usr/bin/psql", ["-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", url, "-c", sql])
        guard result.status == 0 else { throw TestPostgresError(message: "psql: \(result.output)") }
        return result.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Runs a program to its exit and returns its status and output (standard output and
    /// error, through a file).
    ///
    /// Spawned with `posix_spawn` and reaped with `waitpid`, every descriptor above 2 closed in
    /// the child, and not through Foundation's `Process`: `Process` learns of a child's exit
    /// from the end of a socket the child inherits, and `pg_ctl start` hands that socket on to
    /// the server it forks, which keeps it open for its whole life. The wait for `pg_ctl` then
    /// never ended (its `runuser` sat a zombie, never reaped). With the descriptors closed the
    /// server holds nothing of this process's either (another test's pipe, say).
    static func run(_ path: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let log = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("cq-run-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: log) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        guard let closeFrom = addCloseFrom, closeFrom(&actions, 3) == 0 else {
            throw TestPostgresError(message: "posix_spawn_file_actions_addclosefrom_np (glibc 2.34) is missing")
        }
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, path, &actions, nil, argv, environ)
        guard spawned == 0 else {
            throw TestPostgresError(message: "\(path): \(String(cString: strerror(spawned)))")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        // A normal exit's status, else 128 + the signal.
        return (status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F), output)
    }
}

/// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which Swift's Glibc
/// module does not show: looked up by name.
private let addCloseFrom: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32)? =
    dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np").map { unsafeBitCast($0, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self) }

struct TestPostgresError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// A cluster of a test's own, for tests that stop and start the server (`pg_ctl -m immediate`):
/// the shared server stays up for the tests running beside it. Made like scripts/test-postgres
/// makes the shared one (initdb in a temp folder, as `postgres` when root, 127.0.0.1, a free
/// port), and removed by `destroy()`.
final class PrivateCluster: @unchecked Sendable {  // safe: every property is set once in init
    let directory: URL
    let port: Int
    let url: String
    private let bin: String
    private let runAs: String?

    init() throws {
        _ = try TestPostgres.requireURL()
        let environment = ProcessInfo.processInfo.environment
        bin = environment["CQ_PG_BIN"] ?? "/usr/lib/postgresql/15/bin"
        runAs = getuid() == 0 ? (environment["CQ_PG_USER"].flatMap { $0.isEmpty ? nil : $0 } ?? "postgres") : nil
        directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("curlqueue-pg-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        if let runAs { _ = try TestPostgres.run("/bin/chown", [runAs, directory.path]) }
        port = try Self.freePort()
        url = "postgres://cq@127.0.0.1:\(port)/postgres"
        try pg("initdb", ["-D", directory.appendingPathComponent("data").path, "-A", "trust", "-U", "cq", "-E", "UTF8", "--no-sync"])
        let conf = """
            listen_addresses = '127.0.0.1'
            port = \(port)
            unix_socket_directories = '\(directory.path)'
            fsync = off
            max_connections = 100

            """
        try conf.write(to: directory.appendingPathComponent("data/postgresql.auto.conf"), atomically: false, encoding: .utf8)
        try start()
    }

    func start() throws {
        try pg("pg_ctl", ["-D", directory.appendingPathComponent("data").path, "-l", directory.appendingPathComponent("server.log").path,
                          "-w", "-t", "60", "start"])
    }

    /// A crash of the server: no shutdown checkpoint, connections cut at once.
    func stopImmediately() throws {
        try pg("pg_ctl", ["-D", directory.appendingPathComponent("data").path, "-m", "immediate", "-w", "-t", "60", "stop"])
    }

    func destroy() {
        _ = try? stopImmediately()
        try? FileManager.default.removeItem(at: directory)
    }

    private func pg(_ program: String, _ arguments: [String]) throws {
        let path = bin + "/" + program
        let result = runAs.map { user in (try? TestPostgres.run("/usr/sbin/runuser", ["-u", user, "--", path] + arguments)) }
            ?? (try? TestPostgres.run(path, arguments))
        guard let result, result.status == 0 else {
            throw TestPostgresError(message: "\(program) failed: \(result?.output ?? "could not run")")
        }
    }

    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw TestPostgresError(message: "no free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
