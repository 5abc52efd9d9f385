import CurlQueue
import CurlQueueDownloads
import CurlQueueDurable
import Foundation

extension Aria2RPC {
    /// `aria2.addUri([uri…], {options}, position)`: one job in the store. Options mapped to
    /// what a durable job holds (docs/daemon.md lists each); one it cannot honour is refused
    /// with aria2's code 1, and options aria2 would not know are ignored, as aria2 ignores them.
    func addUri(_ params: Params) async throws(Aria2Error) -> RPCValue {
        guard case .array(let items)? = params[0] else { throw .refused("The parameter at 0 has wrong type.") }
        var uris: [String] = []
        for item in items {
            guard let text = item.string else { throw .refused("The parameter at 0 has wrong type.") }
            if !uris.contains(text) { uris.append(text) }
        }
        guard !uris.isEmpty else { throw .refused("No URI to download.") }
        guard uris.count <= InputFile.maxMirrors else { throw .refused("at most \(InputFile.maxMirrors) URIs for one download") }
        // Several URIs are mirrors of one file (`JobRequest.mirrors`: each attempt to the next).
        var urls: [URL] = []
        for text in uris {
            guard case .success(let url) = InputFile.validateURL(text) else {
                throw .refused("The URI is not an http or https URL with a host (spaces and control characters percent-encoded)")
            }
            urls.append(url)
        }
        let url = urls[0]
        var options: [(String, RPCValue)] = []
        switch params[1] {
        case nil: break
        case .object(let members)?: options = members
        default: throw .refused("The parameter at 1 has wrong type.")
        }
        var order = JobOrder.fifo
        if let position = params[2] {
            guard let value = position.integer, value >= 0 else { throw .refused("The parameter at 2 has wrong type.") }
            guard value == 0 else {
                throw .refused("curlq daemon can add a download only at the end or (position 0) at the front of its priority")
            }
            order = .lifo
        }
        var request = try jobRequest(url: url, options: options)
        request.mirrors = urls.dropFirst().map(\.absoluteString)
        for mirror in urls.dropFirst() {
            if let problem = StoredSecrets.problem(url: mirror, fields: [], allowSecretQuery: false) { throw .refused(problem) }
        }
        // Each mirror is tried at least once, as `get` and `enqueue` do.
        let spec = JobSpec(kind: "download", request: request, retry: JobRetryPolicy(maxAttempts: max(5, urls.count)), duplicates: .allow)
        let results: [EnqueueResult]
        do {
            results = try await store.enqueue([spec], queue: queue, order: order)
        } catch let error as JobSpecError {
            throw .refused("the download was refused: \(error)")
        } catch {
            throw .refused("the job store failed: \(error)")
        }
        return .string(GID.of(results[0].id))
    }

    /// The job's request for `url` with aria2's per-download `options` (values are strings; a
    /// header may be an array of them).
    func jobRequest(url: URL, options: [(String, RPCValue)]) throws(Aria2Error) -> JobRequest {
        func text(_ name: String, _ value: RPCValue) throws(Aria2Error) -> String {
            switch value {
            case .string(let text): return text
            case .number(let text): return text
            default: throw .refused("We encountered a problem while processing the option '--\(name)'.")
            }
        }
        var dir: String?
        var out: String?
        var headers: [HeaderField] = []
        var checksum: JobRequest.Checksum?
        var maxBytesPerSecond: Int64?
        for (name, value) in options {
            switch name {
            case "dir": dir = try text(name, value)
            case "out": out = try text(name, value)
            case "header":
                let lines: [RPCValue] = value.array ?? [value]
                for line in lines {
                    switch HeaderField.parse(try text(name, line)) {
                    case .success(let field): headers.append(field)
                    case .failure(let problem): throw .refused("We encountered a problem while processing the option '--header': \(problem.message)")
                    }
                }
            case "user-agent":
                let agent = try text(name, value)
                headers.removeAll { $0.name.lowercased() == "user-agent" }
                headers.append(HeaderField(name: "User-Agent", value: agent))
            case "referer":
                headers.append(HeaderField(name: "Referer", value: try text(name, value)))
            case "checksum": checksum = try Self.checksum(try text(name, value))
            case "split":
                guard let count = Int(try text(name, value)), (1...16).contains(count) else {
                    throw .refused("We encountered a problem while processing the option '--split'.")
                }
                // Accepted and not used: a job downloads over one connection (docs/daemon.md).
            case "max-download-limit":
                guard let limit = Self.speed(try text(name, value)) else {
                    throw .refused("We encountered a problem while processing the option '--max-download-limit'.")
                }
                maxBytesPerSecond = limit > 0 ? limit : nil  // 0: no limit of its own, as aria2's
            default:
                continue  // unknown to curlq: ignored, as aria2 ignores what it does not know
            }
        }
        if headers.contains(where: { $0.name.contains("\n") }) { throw .refused("bad header") }
        if let problem = StoredSecrets.problem(url: url, fields: headers, allowSecretQuery: false) {
            throw .refused(problem)
        }
        let destination = try destination(url: url, dir: dir, out: out)
        return JobRequest(url: url.absoluteString, headerFields: headers.map { .init($0.name, $0.value) },
                          destination: destination, checksum: checksum, maxBytesPerSecond: maxBytesPerSecond)
    }

    /// The destination under the daemon's folder: `dir` must be the folder or inside it (a
    /// relative `dir` is taken inside it), each of its components made safe; `out` made safe.
    func destination(url: URL, dir: String?, out: String?) throws(Aria2Error) -> String {
        var parts: [String] = []
        if let dir, !dir.isEmpty {
            let root = folder.standardizedFileURL.path
            let given = dir.hasPrefix("/") ? URL(fileURLWithPath: dir).standardizedFileURL.path
                : URL(fileURLWithPath: root).appendingPathComponent(dir).standardizedFileURL.path
            guard given == root || given.hasPrefix(root.hasSuffix("/") ? root : root + "/") else {
                throw .refused("dir \(dir) is outside the daemon's folder \(root): every download stays inside it")
            }
            let rest = given.dropFirst(root.count).split(separator: "/").map(String.init)
            for part in rest {
                guard let safe = SafeFileName.sanitizedName(part), safe == part else {
                    throw .refused("dir \(dir): the folder name \(quoted(part)) is not a safe name")
                }
                parts.append(safe)
            }
        }
        let name = out.flatMap { $0.isEmpty ? nil : SafeFileName.sanitize($0) } ?? SafeFileName.from(url: url)
        return (parts + [name]).joined(separator: "/")
    }

    /// aria2's `TYPE=DIGEST` (`sha-256=…`) as a job's checksum.
    static func checksum(_ text: String) throws(Aria2Error) -> JobRequest.Checksum {
        guard let equals = text.firstIndex(of: "=") else {
            throw .refused("We encountered a problem while processing the option '--checksum'.")
        }
        let type = text[..<equals].lowercased()
        let digest = String(text[text.index(after: equals)...]).lowercased()
        let algorithm: DigestAlgorithm? = switch type {
        case "sha-256": .sha256
        case "sha-512": .sha512
        case "sha-1": .sha1
        case "md5": .md5
        default: nil
        }
        guard let algorithm else {
            throw .refused("curlq daemon checks sha-256, sha-512, sha-1 and md5, not \(type)")
        }
        guard digest.utf8.count == algorithm.hexLength, digest.allSatisfy(\.isHexDigit) else {
            throw .refused("We encountered a problem while processing the option '--checksum'.")
        }
        return JobRequest.Checksum(algorithm: algorithm.rawValue, hex: digest)
    }

    /// aria2's speed: bytes per second, with K or M (1024-based); nil when malformed.
    static func speed(_ text: String) -> Int64? {
        var digits = Substring(text)
        var scale: Int64 = 1
        if let last = digits.last, last == "K" || last == "k" { scale = 1024; digits = digits.dropLast() }
        else if let last = digits.last, last == "M" || last == "m" { scale = 1 << 20; digits = digits.dropLast() }
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let value = Int64(digits), value >= 0,
              value <= Int64.max / scale else { return nil }
        return value * scale
    }
}
