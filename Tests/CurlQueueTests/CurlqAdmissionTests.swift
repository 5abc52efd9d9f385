@testable import curlq
import CurlQueueDownloads
import Foundation
import Testing

/// Which file of a batch `curlq` starts next: priority, then input order, within per-host limits.
@Suite struct CurlqAdmissionTests {
    @Test func admissionFollowsPriorityThenOrder() {
        let jobs: [(index: Int, origin: String, priority: InputPriority)] = [
            (0, "a", .low), (1, "a", .normal), (2, "b", .high), (3, "b", .normal), (4, "c", .normal),
        ]
        var fifo = Admission(jobs: jobs, count: 5, lastInFirstOut: false, perHost: 0)
        #expect((0..<6).map { _ in fifo.take() } == [2, 1, 3, 4, 0, nil])
        var lifo = Admission(jobs: jobs, count: 5, lastInFirstOut: true, perHost: 0)
        #expect((0..<6).map { _ in lifo.take() } == [2, 4, 3, 1, 0, nil])
        var subset = Admission(jobs: [(3, "x", .normal), (1, "x", .normal)], count: 5, lastInFirstOut: false, perHost: 0)
        #expect(subset.pendingCount == 2 && subset.take() == 1 && subset.take() == 3 && subset.pendingCount == 0)
    }

    @Test func admissionSkipsHostsAtTheirLimitUntilOneOfTheirTransfersEnds() {
        let jobs: [(index: Int, origin: String, priority: InputPriority)] = [
            (0, "a", .normal), (1, "a", .normal), (2, "a", .normal), (3, "b", .normal), (4, "b", .normal),
        ]
        var admission = Admission(jobs: jobs, count: 5, lastInFirstOut: false, perHost: 1)
        #expect(admission.take() == 0)
        #expect(admission.take() == 3)
        #expect(admission.take() == nil)  // both hosts busy
        admission.finished(3)
        #expect(admission.take() == 4)
        admission.finished(0)
        #expect(admission.take() == 1)
        #expect(admission.takeAllWaiting() == [2])
        admission.finished(1)
        #expect(admission.take() == nil)
        #expect(Admission.origin(of: URL(string: "HTTP://Example.org/x")!) == "http://example.org:80")
        #expect(Admission.origin(of: URL(string: "https://example.org:8443/")!) == "https://example.org:8443")
    }
}
