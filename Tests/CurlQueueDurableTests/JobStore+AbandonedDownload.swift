@testable import CurlQueueDurable
import Foundation
import Testing

extension JobStore {
    /// Enqueues one download of `url` to `destination` that an earlier worker of this node
    /// claimed, checkpointed (when `checkpoint` is given) and gave back without an outcome: what
    /// a worker killed mid-download leaves, once the store took the job back. Returns its id.
    func enqueueAbandonedDownload(url: String, destination: String, checkpoint: Checkpoint?) async throws -> JobID {
        _ = try await enqueue([JobSpec(kind: "download", request: JobRequest(url: url, destination: destination))],
                              queue: "default", order: .fifo)
        let before = WorkerInfo(node: WorkerInfo.localNode, pid: 1)
        try await register(before)
        let claimed = try #require(try await claim(queue: "default", kinds: ["download"], limit: 1, worker: before.id).first)
        if let checkpoint { _ = try await heartbeat(before.id, checkpoints: [claimed.lease.job: checkpoint]) }
        try await release([claimed.lease])
        return claimed.lease.job
    }
}
