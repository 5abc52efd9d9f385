import CurlQueue
import CurlQueueDownloads
import CurlQueueDurable
import Foundation

extension Aria2RPC {
    /// How far back a running job's checkpoint still gives its speed: its worker's heartbeat
    /// comes every 15 s, so an older one means the figure is stale (shown as speed 0).
    static let freshCheckpoint: TimeInterval = 45

    /// aria2's `status` of a job: waiting (scheduled or available), active (running),
    /// complete, error (failed), removed (cancelled).
    static func status(of job: JobRecord) -> String {
        switch job.state {
        case .scheduled, .available: "waiting"
        case .running: "active"
        case .completed: "complete"
        case .failed: "error"
        case .cancelled: "removed"
        }
    }

    /// aria2's exit status for a failed job (its `errorCode`): the nearest of aria2's codes for
    /// the failure's kind.
    static func errorCode(of job: JobRecord) -> String {
        let reason = job.lastError ?? ""
        switch job.outcome?.failureKind {
        case .http?:
            if reason.hasPrefix("HTTP 404") || reason.hasPrefix("HTTP 410") { return "3" }
            if reason.hasPrefix("HTTP 401") || reason.hasPrefix("HTTP 403") { return "24" }
            return "22"
        case .dns?: return "19"
        case .connect?, .network?: return "6"
        case .stall?, .timeout?: return "2"
        case .checksum?: return "32"
        case .existingFile?: return "13"
        case .file?: return "16"
        default: return "1"
        }
    }

    /// Every key of aria2's `tellStatus` that a download over HTTP has, from the job's record:
    /// progress while it runs as this daemon's worker sees it, or, for another daemon's job,
    /// from that worker's last heartbeat checkpoint.
    func statusObject(_ job: JobRecord, keys: Set<String>?, now: Date = Date()) -> RPCValue {
        var completed: Int64 = 0
        var total: Int64 = 0
        var speed: Int64 = 0
        if case .completed(let result)? = job.outcome {
            completed = result.bytes
            total = result.bytes
        } else if job.state == .running, let live = progress()[job.id] {
            // A job of this daemon: as its transfer reports it, not as of the last heartbeat.
            completed = live.bytes
            total = live.total ?? 0
            speed = live.bytesPerSecond.map { Int64($0.rounded()) } ?? 0
        } else if let checkpoint = job.checkpoint {
            completed = checkpoint.bytes
            total = checkpoint.total ?? 0
            if job.state == .running, let rate = checkpoint.bytesPerSecond, rate.isFinite, rate > 0,
               let at = checkpoint.recordedAt, now.timeIntervalSince(at) < Self.freshCheckpoint {
                speed = Int64(rate.rounded())
            }
        }
        let pieceLength: Int64 = 1 << 20
        let path = job.spec.request.destination.map { folder.appendingPathComponent($0).path } ?? ""
        let uri = URL(string: job.spec.request.url).map(Format.url) ?? ""
        var members: [(String, RPCValue)] = [
            ("gid", .string(GID.of(job.id))),
            ("status", .string(Self.status(of: job))),
            ("totalLength", .string(String(total))),
            ("completedLength", .string(String(completed))),
            ("uploadLength", .string("0")),
            ("downloadSpeed", .string(String(speed))),
            ("uploadSpeed", .string("0")),
            ("connections", .string(job.state == .running ? "1" : "0")),
            ("numPieces", .string(String(total > 0 ? (total + pieceLength - 1) / pieceLength : 0))),
            ("pieceLength", .string(String(pieceLength))),
            ("dir", .string(path.isEmpty ? folder.path : (path as NSString).deletingLastPathComponent)),
            ("files", .array([fileObject(job, path: path, uri: uri, total: total, completed: completed)])),
        ]
        if job.state == .failed {
            members.append(("errorCode", .string(Self.errorCode(of: job))))
            members.append(("errorMessage", .string(job.lastError ?? "")))
        } else if job.state == .completed {
            members.append(("errorCode", .string("0")))
            members.append(("errorMessage", .string("")))
        } else if job.state == .cancelled {
            members.append(("errorCode", .string("31")))
            members.append(("errorMessage", .string(job.lastError ?? "removed")))
        }
        guard let keys else { return .object(members) }
        return .object(members.filter { keys.contains($0.0) })
    }

    func fileObject(_ job: JobRecord, path: String, uri: String, total: Int64, completed: Int64) -> RPCValue {
        .object([
            ("index", .string("1")),
            ("path", .string(path)),
            ("length", .string(String(total))),
            ("completedLength", .string(String(completed))),
            ("selected", .string("true")),
            ("uris", .array(uriObjects(job))),
        ])
    }

    /// Every URI of the job, its mirrors included (secrets hidden), as `getUris` lists them.
    func uriObjects(_ job: JobRecord) -> [RPCValue] {
        job.spec.request.urls.map { uriObject(job, uri: URL(string: $0).map(Format.url) ?? "") }
    }

    func uriObject(_ job: JobRecord, uri: String) -> RPCValue {
        .object([("status", .string(job.state == .running || job.state.isFinal ? "used" : "waiting")), ("uri", .string(uri))])
    }

    /// The job of a GID in this daemon's queue, or aria2's "is not found".
    func job(_ gid: (gid: String, job: JobID)) async throws(Aria2Error) -> JobRecord {
        let found = try await storeCall { try await self.store.jobs(JobFilter(queue: self.queue, ids: [gid.job], limit: 1)) }
        guard let job = found.first else { throw .refused("GID \(gid.gid) is not found") }
        return job
    }

    /// Runs a store call; its failure becomes aria2's code 1 with the store's words.
    func storeCall<T: Sendable>(_ body: @Sendable () async throws -> T) async throws(Aria2Error) -> T {
        do {
            return try await body()
        } catch {
            throw .refused("the job store failed: \(error)")
        }
    }

    func tellStatus(_ params: Params) async throws(Aria2Error) -> RPCValue {
        let job = try await job(try params.gid(0))
        return statusObject(job, keys: try params.keys(1))
    }

    func getUris(_ params: Params) async throws(Aria2Error) -> RPCValue {
        let job = try await job(try params.gid(0))
        return .array(uriObjects(job))
    }

    func getFiles(_ params: Params) async throws(Aria2Error) -> RPCValue {
        let job = try await job(try params.gid(0))
        guard case .array(let files)? = statusObject(job, keys: ["files"])["files"] else { return .array([]) }
        return .array(files)
    }

    func tellActive(_ params: Params) async throws(Aria2Error) -> RPCValue {
        let keys = try params.keys(0)
        let jobs = try await storeCall { try await self.store.jobs(JobFilter(queue: self.queue, states: [.running], limit: 100_000)) }
        return .array(jobs.sorted { $0.id < $1.id }.map { statusObject($0, keys: keys) })
    }

    /// `tellWaiting(offset, num, keys)` in the order the jobs would start (priority, then when
    /// due, then id); `tellStopped` oldest first. A negative offset counts from the end and
    /// lists backwards, as aria2's.
    func tellList(_ params: Params, waiting: Bool) async throws(Aria2Error) -> RPCValue {
        let offset = try params.integer(0)
        let count = try params.integer(1)
        let keys = try params.keys(2)
        let states: Set<JobState> = waiting ? [.scheduled, .available] : [.completed, .failed, .cancelled]
        var jobs = try await storeCall { try await self.store.jobs(JobFilter(queue: self.queue, states: states, limit: 100_000)) }
        if waiting {
            jobs.sort { ($1.spec.priority, $0.runAt, $0.id) < ($0.spec.priority, $1.runAt, $1.id) }
        } else {
            jobs.sort { ($0.finalizedAt ?? $0.createdAt, $0.id) < ($1.finalizedAt ?? $1.createdAt, $1.id) }
        }
        guard count > 0 else { return .array([]) }
        let slice: [JobRecord]
        if offset >= 0 {
            slice = Array(jobs.dropFirst(offset).prefix(count))
        } else {
            let end = jobs.count + offset  // -1: the last one
            guard end >= 0 else { return .array([]) }
            slice = Array(jobs[max(0, end - count + 1)...end].reversed())
        }
        return .array(slice.map { statusObject($0, keys: keys) })
    }

    func globalStat() async throws(Aria2Error) -> RPCValue {
        let (counts, running) = try await storeCall {
            (try await self.store.counts(queue: self.queue),
             try await self.store.jobs(JobFilter(queue: self.queue, states: [.running], limit: 100_000)))
        }
        let speed = running.reduce(Int64(0)) { sum, job in
            guard case .string(let text)? = statusObject(job, keys: ["downloadSpeed"])["downloadSpeed"] else { return sum }
            return sum + (Int64(text) ?? 0)
        }
        let stopped = [JobState.completed, .failed, .cancelled].reduce(0) { $0 + (counts[$1] ?? 0) }
        return .object([
            ("downloadSpeed", .string(String(speed))),
            ("numActive", .string(String(counts[.running] ?? 0))),
            ("numStopped", .string(String(stopped))),
            ("numStoppedTotal", .string(String(stopped))),
            ("numWaiting", .string(String((counts[.available] ?? 0) + (counts[.scheduled] ?? 0)))),
            ("uploadSpeed", .string("0")),
        ])
    }
}
