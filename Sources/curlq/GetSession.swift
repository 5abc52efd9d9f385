import CurlQueueDownloads
import CurlQueueDurable
import CurlQueueSQLite
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `curlq get --session FILE`: the batch recorded, file by file, in a durable job store (one
/// SQLite file), so that the same command run again after a crash, `kill -9`, a reboot or
/// Ctrl-C goes on where it stopped.
///
/// Not a second download engine: ``BatchRunner`` downloads as always and tells the session
/// when a file starts and how it ended; the session turns that into the store's own steps
/// (enqueue, claim = running, finish = completed or failed, release = back to available).
/// A file is one job of the queue ``queueName``, its dedup key its final path. At start,
/// ``prepare(_:paths:)`` rescues what a killed run held, and names the files recorded
/// completed whose file is there with the recorded size: those are skipped with no request
/// (hashed only when the input gives a checksum). Everything else runs with `-c`: an
/// interrupted file resumes from its `.part` with a Range request.
///
/// Store calls run in order on one task, off the runner's queue; a store that fails mid-run
/// (a full disk) costs only a warning: the downloads go on, and the next run redoes more.
final class GetSession: @unchecked Sendable {  // safe: `leases`, `warned` are touched only by `task`; the rest is immutable
    static let queueName = "curlq-get"

    enum Event: Sendable {
        case started(Int)
        case finished(Int, FileResult)
    }

    let path: String
    private let store: SQLiteJobStore
    private let worker = WorkerInfo(node: WorkerInfo.localNode, pid: getpid())
    private var keys: [Int: String] = [:]
    private var leases: [Int: Lease] = [:]
    private var warned = false
    private let events: AsyncStream<Event>
    private let sink: AsyncStream<Event>.Continuation
    private var task: Task<Void, Never>?

    /// Opens (or creates, 0600) the session file. A file that is there and is not an SQLite
    /// database, or a folder, is a usage error, and nothing is written to it.
    init(path: String) throws {
        self.path = path
        switch FileKind.of(path) {
        case .directory:
            throw UsageError("--session \(quoted(path)) is a folder, not a session file; nothing was downloaded")
        case .missing:
            break
        default:
            if let reason = Self.notAStore(path) {
                throw UsageError("--session \(quoted(path)): \(reason); it was left as it is and nothing was downloaded")
            }
        }
        var options = SQLiteJobStore.Options()
        options.retention = .seconds(100 * 365 * 24 * 3600)  // a session's record is kept until its file is deleted
        do {
            store = try SQLiteJobStore(path: path, options: options)
        } catch {
            throw UsageError("--session \(quoted(path)): cannot open it as a session (an SQLite store): \(error); nothing was downloaded")
        }
        (events, sink) = AsyncStream.makeStream(of: Event.self)
    }

    /// Why the file at `path` cannot be a session: unreadable, or not empty and not an SQLite
    /// database (its first 16 bytes). nil when it may be one.
    static func notAStore(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return "cannot read it: \(String(cString: strerror(errno)))" }
        defer { close(descriptor) }
        var header = [UInt8](repeating: 0, count: 16)
        let count = header.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, 16) }
        if count == 0 { return nil }
        return count == 16 && header == Array("SQLite format 3\0".utf8) ? nil : "it is not a curlq session file (an SQLite store)"
    }

    /// Registers this run, rescues the files a killed run held, records the files not yet
    /// recorded, and returns the indexes of those recorded completed and still there whole.
    /// Only jobs planned `.skip` (the final file is there, no `--overwrite`) can be among them.
    func prepare(_ jobs: [Job], paths: JobPaths) async throws -> Set<Int> {
        do {
            try await store.register(worker)
            _ = try await store.maintain()
            var newest: [String: JobRecord] = [:]
            let records = try await store.jobs(JobFilter(queue: Self.queueName, limit: Int(Int32.max)))
            // Still running after the rescue: held by a live run, which writes those .part files.
            if records.contains(where: { $0.state == .running }) {
                try? await store.unregister(worker.id)
                throw InUse()
            }
            for record in records {
                guard let key = record.spec.key, newest[key] == nil else { continue }  // newest first
                newest[key] = record
            }
            var done = Set<Int>()
            var specs: [JobSpec] = []
            for job in jobs {
                if case .fail = job.plan { continue }
                let key = paths.final(job)
                keys[job.index] = key
                let record = newest[key]
                if job.plan == .skip, job.checksum == nil, record?.state == .completed,
                   case .completed(let result)? = record?.outcome, FileKind.size(key) == result.bytes {
                    done.insert(job.index)
                    continue
                }
                if let state = record?.state, [.scheduled, .available, .running].contains(state) { continue }
                specs.append(JobSpec(
                    kind: Self.kind(key), request: JobRequest(url: StoredSecrets.redacted(job.url), destination: job.name),
                    retry: JobRetryPolicy(maxAttempts: 1_000_000), duplicates: .skipIfPending, key: key))
            }
            if !specs.isEmpty { _ = try await store.enqueue(specs, queue: Self.queueName, order: .fifo) }
            task = Task { [self] in
                for await event in events { await record(event) }
            }
            return done
        } catch is InUse {
            throw UsageError("--session \(quoted(path)) is in use by another curlq that is running; nothing was downloaded")
        } catch {
            throw UsageError("--session \(quoted(path)): cannot record the batch in it: \(error); nothing was downloaded")
        }
    }

    private struct InUse: Error {}

    /// Each file's own kind, so that its start claims exactly it.
    static func kind(_ key: String) -> String { "curlq.get " + key }

    /// Called by the runner, on its queue; returns at once.
    func note(_ event: Event) { sink.yield(event) }

    /// Records what is still to record, gives back what this run held, and lets the file go.
    func end() async {
        sink.finish()
        await task?.value
        do {
            try await store.release(Array(leases.values))
            try await store.unregister(worker.id)
        } catch {
            warn(error)
        }
    }

    private func record(_ event: Event) async {
        do {
            switch event {
            case .started(let index):
                if leases[index] == nil { leases[index] = try await claim(index) }
            case .finished(let index, let result):
                if result.outcome == .interrupted {
                    if let lease = leases.removeValue(forKey: index) { try await store.release([lease]) }
                    return
                }
                if leases[index] == nil, result.outcome == .skipped { leases[index] = try await claim(index) }
                guard let lease = leases.removeValue(forKey: index) else { return }
                let outcome: JobOutcome = switch result.outcome {
                case .downloaded, .skipped:
                    .completed(JobResult(status: result.status ?? 200, bytes: result.bytes, file: result.path, sha256: result.sha256))
                default:
                    .failed(reason: result.error ?? "failed")
                }
                if try await store.finish(lease, outcome) { _ = try await store.markHandled(lease) }
            }
        } catch {
            warn(error)
        }
    }

    /// Claims the file's job: it becomes running, held by this run. A final job whose handler
    /// never ran (a killed run's) is marked handled on the way.
    private func claim(_ index: Int) async throws -> Lease? {
        guard let key = keys[index] else { return nil }
        for _ in 0..<4 {
            guard let claimed = try await store.claim(queue: Self.queueName, kinds: [Self.kind(key)], limit: 1, worker: worker.id).first
            else { return nil }
            guard claimed.recorded != nil else { return claimed.lease }
            _ = try await store.markHandled(claimed.lease)
        }
        return nil
    }

    private func warn(_ error: any Error) {
        guard !warned else { return }
        warned = true
        Output.error("curlq: warning: --session \(path): cannot record in it (\(error)); the downloads go on, a rerun may repeat some\n")
    }
}
