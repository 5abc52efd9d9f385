import CurlQueue
import Foundation
import HTTPTypes

extension JobRequest {
    /// What a download with a checksum is called until it matched.
    static let unverifiedSuffix = ".unverified"

    /// Where the transfer writes, relative to the worker's folder: ``destination``, or with a
    /// checksum `NAME.unverified` until it matched (its `.part` beside it).
    var stagedDestination: String? {
        destination.map { $0 + (checksum == nil ? "" : Self.unverifiedSuffix) }
    }

    /// The core request for this job, downloading under `folder`, with `extraFields` (a
    /// resolved credential, the idempotency key) appended. Returns nil with a reason when it
    /// cannot be made (the store checked it at enqueue; this checks again).
    /// Attempt `attempt` goes to ``url(forAttempt:)``.
    func request(folder: URL, extraFields: [Field], attempt: Int = 1) -> Result<Request, JobSpecError> {
        let text = url(forAttempt: attempt)
        guard let url = URL(string: text) else { return .failure(.badURL(text)) }
        guard let method = HTTPRequest.Method(method) else { return .failure(.badMethod(method)) }
        var request = Request(url: url, method: method)
        for field in headerFields + extraFields { request.addHeader(field.name, field.value) }
        switch body {
        case .inline(let data)?: request.body = .bytes(data)
        case .file(let path)?: request.body = .file(URL(fileURLWithPath: path))
        case nil: break
        }
        var core = Request.Timeouts()
        if let connect = timeouts.connect { core.connect = .milliseconds(Int64(connect * 1000)) }
        if let total = timeouts.total { core.total = .milliseconds(Int64(total * 1000)) }
        if let idle = timeouts.idle { core.idle = .milliseconds(Int64(idle * 1000)) }
        if let head = timeouts.head { core.head = .milliseconds(Int64(head * 1000)) }
        request.timeouts = core
        if let destination = stagedDestination {
            // With a checksum the bytes stay `NAME.unverified` until they match: nothing
            // unverified ever stands under the job's name (curlq get's rule).
            request.destination = folder.appendingPathComponent(destination)
            request.resume = resume
            request.fileDigests = [.sha256]
            if let algorithm = checksum.flatMap({ DigestAlgorithm(rawValue: $0.algorithm.lowercased()) }) {
                request.fileDigests.insert(algorithm)
            }
        }
        if let maxResponseBodySize { request.maxResponseBodySize = maxResponseBodySize }
        if let maxBytesPerSecond { request.maxReceiveSpeed = maxBytesPerSecond }
        return .success(request)
    }
}
