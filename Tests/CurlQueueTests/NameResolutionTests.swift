import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// A host name that cannot be resolved: `couldNotResolveHost` (6), which `autoRetry` retries
/// like the other connectivity codes, up to `maxAttempts`.
///
/// The name is under `.invalid` (RFC 6761: never resolves) and its first label is 64
/// characters, one more than DNS allows, so glibc's resolver refuses it without sending a query:
/// the tests send nothing but to 127.0.0.1. libcurl reports every resolver failure with code 6,
/// NXDOMAIN or a resolver that cannot be reached alike; a retry is what the second needs.
@Suite struct NameResolutionTests {
    static let unresolvable = URL(string: "http://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.invalid/file")!

    @Test func anUnresolvableNameFailsWithCouldNotResolveHost() async throws {
        let result = await completion(of: RequestOperation(request: Request(url: Self.unresolvable)))
        #expect(transportCode(of: result) == .couldNotResolveHost, "\(result)")
    }

    /// With `autoRetry` and 3 attempts, the queue reports retries 2 and 3, then the failure.
    @Test func autoRetryRetriesAnUnresolvableNameUpToMaxAttempts() async throws {
        let queue = RequestQueue()
        let events = queue.events()
        let operation = RequestOperation(request: Request(url: Self.unresolvable))
        operation.autoRetry = true
        operation.retryPolicy = RetryPolicy(maxAttempts: 3, initialBackoff: .milliseconds(10), maxBackoff: .milliseconds(20))
        try queue.add(operation)
        var retries: [Int] = []
        var outcome: Result<Response, RequestError>?
        loop: for await event in events {
            switch event {
            case .retrying(let subject, let attempt, _) where subject === operation:
                retries.append(attempt)
            case .finished(let subject, let result) where subject === operation:
                outcome = result
                break loop
            default:
                break
            }
        }
        #expect(retries == [2, 3])
        #expect(outcome.map(transportCode(of:)) == .couldNotResolveHost, "\(String(describing: outcome))")
    }

    // MARK: A resolver that never answers

    /// Whether the tests may give a process a resolv.conf of its own: root (to bind port 53 on
    /// a loopback address) and a private mount namespace (`unshare --mount`). CI runs as root.
    static func canStallTheResolver() async -> Bool {
        guard getuid() == 0 else { return false }
        return (try? await DiskErrorTests.shell("unshare --mount true").status) == 0
    }

    /// Runs MemoryProbe's `--stalled-resolve` mode in a mount namespace whose resolv.conf names
    /// `nameserver` (one per test, as they run in parallel), where the probe takes DNS queries and never answers (a 5 s resolver timeout,
    /// one attempt): it reports how long an unrelated request to the fixture took meanwhile,
    /// and how the stalled transfer ended.
    func stalledResolve(_ mode: String, nameserver: String, server: FixtureServer) async throws -> [String: String] {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let conf = folder.appendingPathComponent("resolv.conf").path
        try "nameserver \(nameserver)\noptions timeout:12 attempts:1\n".write(toFile: conf, atomically: true, encoding: .utf8)
        let (output, status) = try await DiskErrorTests.shell("""
            unshare --mount sh -c 'mount --bind \(conf) /etc/resolv.conf || exit 3
                exec \(DiskErrorTests.probe) --stalled-resolve \(mode) \(nameserver) \(server.url("/bytes/10?unrelated=1").absoluteString)'
            """)
        #expect(status == 0, "\(output)")
        var fields: [String: String] = [:]
        for word in output.split(whereSeparator: \.isWhitespace) {
            let parts = word.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
        }
        return fields
    }

    /// A transfer cancelled while its name is being resolved leaves the resolver's thread to
    /// finish alone: the cancel completes at once, and a request to 127.0.0.1 made meanwhile goes
    /// through within 5 s (the resolver would hold the engine thread 12 s; the margin is for a
    /// loaded machine).
    @Test(.enabled("needs root and a private mount namespace") { await canStallTheResolver() })
    func aCancelWhileResolvingNeverHoldsTheEngine() async throws {
        try await withServer { (server) async throws in
            let report = try await stalledResolve("cancel", nameserver: "127.0.0.77", server: server)
            #expect(report["unrelated"] == "200", "\(report)")
            #expect(Double(report["unrelatedSeconds"] ?? "") ?? 99 < 5, "\(report)")
            #expect(report["stalled"] == "cancelled", "\(report)")
            #expect(Double(report["stalledSeconds"] ?? "") ?? 99 < 5, "\(report)")
        }
    }

    /// The connect limit (1 s) fires while the name is being resolved: the transfer times out
    /// after about 1 s, not after the resolver's 12 s, and a request made meanwhile goes through.
    @Test(.enabled("needs root and a private mount namespace") { await canStallTheResolver() })
    func aConnectLimitFiringWhileResolvingNeverHoldsTheEngine() async throws {
        try await withServer { (server) async throws in
            let report = try await stalledResolve("timeout", nameserver: "127.0.0.78", server: server)
            #expect(report["unrelated"] == "200", "\(report)")
            #expect(Double(report["unrelatedSeconds"] ?? "") ?? 99 < 5, "\(report)")
            #expect(report["stalled"]?.hasPrefix("timed") == true, "\(report)")
            #expect(Double(report["stalledSeconds"] ?? "") ?? 99 < 6, "\(report)")
        }
    }
}
