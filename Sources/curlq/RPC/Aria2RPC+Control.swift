import CurlQueue
import CurlQueueDurable
import Foundation

extension Aria2RPC {
    /// `remove`/`forceRemove`: a waiting job is cancelled at once, a running one at its
    /// worker's next heartbeat. A finished job is aria2's "Active Download not found".
    func remove(_ params: Params) async throws(Aria2Error) -> RPCValue {
        let gid = try params.gid(0)
        let found = try await storeCall { try await self.store.jobs(JobFilter(queue: self.queue, ids: [gid.job], limit: 1)) }
        guard let job = found.first, !job.state.isFinal else {
            throw .refused("Active Download not found for GID#\(gid.gid)")
        }
        let result = try await storeCall { try await self.store.cancel(.id(gid.job)) }
        guard !(result.cancelled + result.requested).isEmpty else {
            throw .refused("Active Download not found for GID#\(gid.gid)")
        }
        return .string(gid.gid)
    }

    /// One download's pause: not in the store yet (docs/daemon.md); the queue's is.
    func pause(_ params: Params, name: String) async throws(Aria2Error) -> RPCValue {
        let gid = try params.gid(0)
        _ = try await job(gid)
        throw .refused("curlq daemon cannot pause one download yet: aria2.pauseAll pauses the queue, and aria2.remove cancels one")
    }

    /// `pauseAll`/`unpauseAll`: the store's queue, for every daemon on it. Running downloads go
    /// on (aria2 pauses them too: a difference, docs/daemon.md).
    func setPaused(_ paused: Bool) async throws(Aria2Error) -> RPCValue {
        try await storeCall { try await self.store.setPaused(paused, queue: self.queue) }
        return .string("OK")
    }

    /// `getOption(gid)`: the job's options as aria2 names them.
    func getOption(_ params: Params) async throws(Aria2Error) -> RPCValue {
        let job = try await job(try params.gid(0))
        let request = job.spec.request
        var members: [(String, RPCValue)] = []
        if let destination = request.destination {
            let path = folder.appendingPathComponent(destination)
            members.append(("dir", .string(path.deletingLastPathComponent().path)))
            members.append(("out", .string(path.lastPathComponent)))
        } else {
            members.append(("dir", .string(folder.path)))
        }
        let headers = request.headerFields.filter { $0.name.lowercased() != "user-agent" }
        if !headers.isEmpty { members.append(("header", .string(headers.map { "\($0.name): \($0.value)" }.joined(separator: "\n")))) }
        if let agent = request.headerFields.last(where: { $0.name.lowercased() == "user-agent" }) {
            members.append(("user-agent", .string(agent.value)))
        }
        if let checksum = request.checksum {
            let type = switch checksum.algorithm { case "sha256": "sha-256"; case "sha512": "sha-512"; case "sha1": "sha-1"; default: checksum.algorithm }
            members.append(("checksum", .string("\(type)=\(checksum.hex)")))
        }
        members.append(("max-tries", .string(String(job.spec.retry.maxAttempts))))
        members.append(("split", .string("1")))
        return .object(members)
    }

    /// `purgeDownloadResult`: every finished job of the queue whose outcome was handled leaves
    /// the store now (the store's retention would remove it later).
    func purge() async throws(Aria2Error) -> RPCValue {
        _ = try await storeCall { try await self.store.removeFinished(nil, queue: self.queue) }
        return .string("OK")
    }

    /// `removeDownloadResult(gid)`: one finished job leaves the store.
    func removeResult(_ params: Params) async throws(Aria2Error) -> RPCValue {
        let gid = try params.gid(0)
        _ = try await job(gid)
        let removed = try await storeCall { try await self.store.removeFinished([gid.job], queue: self.queue) }
        guard removed == [gid.job] else { throw .refused("Could not remove download result of GID#\(gid.gid)") }
        return .string("OK")
    }

    func changeOption(_ params: Params) async throws(Aria2Error) -> RPCValue {
        _ = try await job(try params.gid(0))
        throw .refused("curlq daemon cannot change a download's options yet: remove it and add it again")
    }

    func getGlobalOption() -> RPCValue {
        var members = globalOptions
        members.append(("max-concurrent-downloads", String(settings.maxConcurrent)))
        members.append(("max-overall-download-limit", String(settings.overallRate?.bytesPerSecond ?? 0)))
        return .object(members.sorted { $0.0 < $1.0 }.map { ($0.0, .string($0.1)) })
    }

    /// `changeGlobalOption`: `max-overall-download-limit` (the daemon's downloads together,
    /// from their next start) and `max-concurrent-downloads` (1 to the daemon's -j). Every
    /// option is checked before any is changed.
    func changeGlobalOption(_ params: Params) throws(Aria2Error) -> RPCValue {
        guard case .object(let members)? = params[0] else { throw .refused("The parameter at 0 has wrong type.") }
        var rate: Int64?
        var concurrent: Int?
        for (name, value) in members {
            guard let text = value.string ?? (value.integer.map(String.init)) else {
                throw .refused("We encountered a problem while processing the option '--\(name)'.")
            }
            switch name {
            case "max-overall-download-limit":
                guard let limit = Self.speed(text) else {
                    throw .refused("We encountered a problem while processing the option '--\(name)'.")
                }
                rate = limit
            case "max-concurrent-downloads":
                guard let count = Int(text), count >= 1 else {
                    throw .refused("We encountered a problem while processing the option '--\(name)'.")
                }
                guard count <= settings.startConcurrent else {
                    throw .refused("curlq daemon runs at most its -j \(settings.startConcurrent) downloads at once; restart it with a larger -j")
                }
                concurrent = count
            default:
                throw .refused("curlq daemon cannot change the option \(name) while it runs")
            }
        }
        if let rate { settings.setOverallRate(rate) }
        if let concurrent { settings.setMaxConcurrent(concurrent) }
        return .string("OK")
    }
}
