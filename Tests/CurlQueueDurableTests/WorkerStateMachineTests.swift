import CurlQueue
import CurlQueueDownloads
@testable import CurlQueueDurable
import Foundation
import HTTPTypes
import Testing

/// The worker's decisions, driven step by step with an injected clock.
@Suite struct WorkerStateMachineTests {
    typealias Machine = WorkerStateMachine
    let start = ContinuousClock().now
    let settings = Machine.Settings(
        capacity: 2, heartbeatInterval: .seconds(15), selfFence: .seconds(45), maintenanceInterval: .seconds(10),
        pollInterval: .seconds(1))

    func job(_ id: JobID, token: Int64 = 1, recorded: JobOutcome? = nil) -> ClaimedJob {
        let spec = JobSpec(kind: "download", request: JobRequest(url: "http://127.0.0.1/\(id)"))
        let date = Date(timeIntervalSince1970: 1_000_000)
        let record = JobRecord(id: id, queue: "q", spec: spec, state: .running, attempt: 1, runAt: date, createdAt: date)
        return ClaimedJob(lease: Lease(job: id, token: token), record: record, recorded: recorded)
    }

    let done = JobOutcome.completed(JobResult(status: 200, bytes: 1))

    @Test func claimsOnlyFreeSlotsAndRecordsBeforeTheHandler() {
        var machine = Machine(settings: settings, now: start)
        #expect(machine.tick(now: start) == [.maintain, .claim(limit: 2)], "registered just now: no heartbeat yet")
        #expect(machine.claimed([job(1)], limit: 2, now: start) == [.startTransfer(job(1))], "fewer than asked: wait")
        #expect(machine.wakeup(now: start) == [.claim(limit: 1)], "one slot left")
        #expect(machine.wakeup(now: start) == [], "one claim at a time")
        #expect(machine.claimed([job(2)], limit: 1, now: start) == [.startTransfer(job(2))])
        #expect(machine.wakeup(now: start) == [], "no free slot")
        #expect(machine.transferEnded(1, outcome: done, now: start) == [.finish(Lease(job: 1, token: 1), done)])
        #expect(machine.finished(1, recorded: true, now: start) == [.runHandler(1, done)], "the handler after the record")
        #expect(machine.wakeup(now: start) == [], "the slot is held until the handler returns")
        #expect(machine.handlerReturned(1) == [.markHandled(Lease(job: 1, token: 1))])
        #expect(machine.marked(1, now: start) == [.claim(limit: 1)])
    }

    @Test func aLostLeaseRecordsNothingAndRunsNoHandler() {
        var machine = Machine(settings: settings, now: start)
        _ = machine.tick(now: start)
        _ = machine.claimed([job(1)], limit: 2, now: start)
        _ = machine.transferEnded(1, outcome: done, now: start)
        #expect(machine.finished(1, recorded: false, now: start + .seconds(2)) == [.claim(limit: 2)])
        #expect(machine.held.isEmpty)
    }

    @Test func heartbeatRepliesCancelAndAbandon() {
        var machine = Machine(settings: settings, now: start)
        _ = machine.tick(now: start)
        _ = machine.heartbeatReplied(.alive(held: [], cancelRequested: []), sentAt: start, now: start)
        _ = machine.claimed([job(1), job(2)], limit: 2, now: start + .seconds(1))
        let later = start + .seconds(15)
        #expect(machine.tick(now: later) == [.heartbeat(jobs: [1, 2]), .maintain])
        // 1 was asked to cancel, 2 is no longer ours.
        let actions = machine.heartbeatReplied(.alive(held: [1], cancelRequested: [1]), sentAt: later, now: later)
        #expect(actions == [.cancelTransfer(1), .cancelTransfer(2)])
        let cancelled = JobOutcome.cancelled(reason: "cancelled")
        #expect(machine.transferEnded(1, outcome: cancelled, now: later) == [.finish(Lease(job: 1, token: 1), cancelled)])
        #expect(machine.transferEnded(2, outcome: cancelled, now: later) == [.claim(limit: 1)], "abandoned: nothing recorded")
    }

    @Test func aJobClaimedAfterTheHeartbeatWasSentIsNotLost() {
        var machine = Machine(settings: settings, now: start)
        _ = machine.tick(now: start)  // heartbeat sent at `start`
        _ = machine.claimed([job(1)], limit: 2, now: start + .milliseconds(5))
        #expect(machine.heartbeatReplied(.alive(held: [], cancelRequested: []), sentAt: start, now: start + .milliseconds(9)) == [])
        #expect(machine.held[1] != nil)
    }

    @Test func noGoodHeartbeatForTheSelfFenceStopsEveryTransfer() {
        var machine = Machine(settings: settings, now: start)
        _ = machine.tick(now: start)
        _ = machine.heartbeatReplied(.alive(held: [], cancelRequested: []), sentAt: start, now: start)
        _ = machine.claimed([job(1)], limit: 2, now: start)
        _ = machine.tick(now: start + .seconds(15))
        _ = machine.heartbeatFailed(now: start + .seconds(16))
        #expect(!machine.tick(now: start + .seconds(44)).contains(.cancelTransfer(1)), "within the fence")
        #expect(machine.tick(now: start + .seconds(46)).contains(.cancelTransfer(1)))
        let ended = machine.transferEnded(1, outcome: done, now: start + .seconds(46))
        #expect(!ended.contains { if case .finish = $0 { true } else { false } }, "nothing recorded")
        #expect(machine.held.isEmpty)
    }

    /// A worker stopped (SIGSTOP) past its self-fence, or cut off from the store for less than
    /// the TTL, fences itself; when the store then says it is alive and still holds the jobs
    /// (no rescue takes a live worker's jobs), it gives them back instead of keeping them
    /// `running` for ever. Once, and only after their transfer has ended.
    @Test func aSelfFenceTheStoreDidNotFollowGivesTheJobsBack() {
        var machine = Machine(settings: settings, now: start)
        _ = machine.tick(now: start)
        _ = machine.heartbeatReplied(.alive(held: [], cancelRequested: []), sentAt: start, now: start)
        _ = machine.claimed([job(1), job(2)], limit: 2, now: start)
        // Stopped for a minute: the first tick after it fences and asks for a heartbeat.
        let later = start + .seconds(60)
        let fence = machine.tick(now: later)
        #expect(fence.contains(.cancelTransfer(1)) && fence.contains(.cancelTransfer(2)) && fence.contains(.heartbeat(jobs: [1, 2])))
        _ = machine.transferEnded(1, outcome: .cancelled(reason: "cancelled"), now: later)
        let alive = machine.heartbeatReplied(.alive(held: [1, 2], cancelRequested: []), sentAt: later, now: later)
        #expect(alive.contains(.giveBack([Lease(job: 1, token: 1)])), "ended: given back")
        #expect(!alive.contains(.giveBack([Lease(job: 1, token: 1), Lease(job: 2, token: 1)])), "2 still transferring")
        _ = machine.transferEnded(2, outcome: .cancelled(reason: "cancelled"), now: later)
        let next = later + .seconds(15)
        _ = machine.tick(now: next)
        #expect(machine.heartbeatReplied(.alive(held: [2], cancelRequested: []), sentAt: next, now: next)
            .contains(.giveBack([Lease(job: 2, token: 1)])))
        let third = next + .seconds(15)
        _ = machine.tick(now: third)
        #expect(!machine.heartbeatReplied(.alive(held: [], cancelRequested: []), sentAt: third, now: third)
            .contains { if case .giveBack = $0 { true } else { false } }, "given back once")
    }

    @Test func declaredDeadAbandonsAndRegistersAgain() {
        var machine = Machine(settings: settings, now: start)
        _ = machine.tick(now: start)
        _ = machine.claimed([job(1)], limit: 2, now: start)
        #expect(machine.heartbeatReplied(.declaredDead, sentAt: start, now: start) == [.cancelTransfer(1), .reregister])
    }

    @Test func stopDrainsThenReleasesWhatIsLeft() {
        var machine = Machine(settings: settings, now: start)
        _ = machine.tick(now: start)
        _ = machine.claimed([job(1), job(2)], limit: 2, now: start)
        #expect(machine.stop(now: start, drain: .seconds(30)) == [])
        _ = machine.transferEnded(1, outcome: done, now: start + .seconds(1))
        #expect(machine.finished(1, recorded: true, now: start + .seconds(1)) == [.runHandler(1, done)], "no claim while stopping")
        #expect(machine.handlerReturned(1) == [.markHandled(Lease(job: 1, token: 1))])
        #expect(machine.marked(1, now: start + .seconds(2)) == [])
        #expect(machine.tick(now: start + .seconds(31)).contains(.cancelTransfer(2)), "past the deadline")
        let cancelled = JobOutcome.cancelled(reason: "cancelled")
        #expect(machine.transferEnded(2, outcome: cancelled, now: start + .seconds(31)) == [.release([Lease(job: 2, token: 1)])])
        #expect(machine.released() == [.stopped])
        #expect(machine.isStopped)
    }

    @Test func aLaterStopWithAShorterDrainBringsTheDeadlineForward() {
        var machine = Machine(settings: settings, now: start)
        _ = machine.tick(now: start)
        _ = machine.claimed([job(1)], limit: 2, now: start)
        #expect(machine.stop(now: start, drain: .seconds(30)) == [])
        #expect(machine.stop(now: start + .seconds(1), drain: .seconds(60)) == [], "a longer drain changes nothing")
        #expect(!machine.tick(now: start + .seconds(2)).contains(.cancelTransfer(1)))
        #expect(machine.stop(now: start + .seconds(2), drain: .zero).contains(.cancelTransfer(1)), "a cancellation: at once")
    }

    @Test func aTransferThatEndsAsTheDeadlinePassesIsRecorded() {
        var machine = Machine(settings: settings, now: start)
        _ = machine.tick(now: start)
        _ = machine.claimed([job(1)], limit: 2, now: start)
        _ = machine.stop(now: start, drain: .zero)
        #expect(machine.transferEnded(1, outcome: done, now: start) == [.finish(Lease(job: 1, token: 1), done)])
    }

    /// Issue 23: the store is unreachable while stopping. A finished transfer whose `finish`
    /// keeps failing, and a release that never returns, hold the stop only until the drain
    /// deadline plus the store grace (well inside the 45 s self-fence): then the machine stops,
    /// naming the jobs it could not record or give back.
    @Test func stopCompletesAfterTheDeadlinePlusTheStoreGraceWithUnrecordedFinishes() {
        var settings = settings
        settings.storeGrace = .seconds(5)
        var machine = Machine(settings: settings, now: start)
        _ = machine.tick(now: start)
        _ = machine.heartbeatReplied(.alive(held: [], cancelRequested: []), sentAt: start, now: start)
        _ = machine.claimed([job(1), job(2)], limit: 2, now: start)
        #expect(machine.stop(now: start + .seconds(1), drain: .seconds(2)) == [])  // deadline: start + 3 s
        #expect(machine.transferEnded(1, outcome: done, now: start + .seconds(2)) == [.finish(Lease(job: 1, token: 1), done)])
        #expect(machine.finishFailed(1) == [], "the store is away")
        let atDeadline = machine.tick(now: start + .seconds(3))
        #expect(atDeadline.contains(.cancelTransfer(2)) && atDeadline.contains(.finish(Lease(job: 1, token: 1), done)))
        _ = machine.finishFailed(1)
        #expect(machine.transferEnded(2, outcome: .cancelled(reason: "cancelled"), now: start + .seconds(3)) == [],
                "1 is still to record: no release yet")
        for second in 4...7 {
            #expect(machine.tick(now: start + .seconds(second)).contains(.finish(Lease(job: 1, token: 1), done)), "sent again")
            _ = machine.finishFailed(1)
            #expect(!machine.isStopped, "within the grace")
        }
        #expect(machine.tick(now: start + .seconds(8)) == [.gaveUp([1, 2]), .stopped], "deadline + grace: stop without them")
        #expect(machine.isStopped)
        #expect(machine.finished(1, recorded: true, now: start + .seconds(9)) == [], "a late reply changes nothing")
        #expect(machine.released() == [])

        // A release sent that never returns: the same bound.
        var releasing = Machine(settings: settings, now: start)
        _ = releasing.tick(now: start)
        _ = releasing.claimed([job(3)], limit: 2, now: start)
        _ = releasing.stop(now: start, drain: .seconds(1))
        #expect(releasing.tick(now: start + .seconds(1)).contains(.cancelTransfer(3)))
        #expect(releasing.transferEnded(3, outcome: .cancelled(reason: "cancelled"), now: start + .seconds(1))
                == [.release([Lease(job: 3, token: 1)])])
        #expect(releasing.tick(now: start + .seconds(5)) == [], "within the grace")
        #expect(releasing.tick(now: start + .seconds(6)) == [.gaveUp([3]), .stopped])
        #expect(releasing.released() == [])
    }

    @Test func jobsTheStoreSaysItHoldsButItDoesNotRunAreGivenBack() {
        var machine = Machine(settings: settings, now: start)
        #expect(machine.tick(now: start) == [.maintain, .claim(limit: 2)])
        let sent = start + .seconds(15)
        #expect(machine.tick(now: sent) == [.heartbeat(jobs: []), .maintain])
        // A claim is in flight: its reply may bring 5 and 7, so nothing is given back yet.
        #expect(machine.heartbeatReplied(.alive(held: [5, 7], cancelRequested: []), sentAt: sent, now: sent) == [])
        // It brings 5; 7 it does not bring: given back.
        #expect(machine.claimed([job(5)], limit: 2, now: sent) == [.startTransfer(job(5)), .releaseUnknown([7])])
        _ = machine.transferEnded(5, outcome: .failed(reason: "x"), now: sent)
        _ = machine.finished(5, recorded: true, now: sent)
        _ = machine.handlerReturned(5)
        _ = machine.marked(5, now: sent)
        // Another heartbeat while a claim is in flight, whose reply was lost (it failed here,
        // but committed there): its jobs are given back once it has failed.
        #expect(machine.wakeup(now: sent) == [.claim(limit: 2)])
        #expect(machine.heartbeatReplied(.alive(held: [6], cancelRequested: []), sentAt: sent, now: sent) == [])
        #expect(machine.claimFailed(now: sent) == [.releaseUnknown([6])])
        _ = machine.claimed([job(1)], limit: 2, now: sent + .seconds(1))
        let next = sent + .seconds(15)
        #expect(machine.tick(now: next) == [.heartbeat(jobs: [1]), .maintain, .claim(limit: 1)])
        _ = machine.claimed([], limit: 1, now: next)
        #expect(machine.heartbeatReplied(.alive(held: [1, 7, 8], cancelRequested: []), sentAt: next, now: next)
            == [.releaseUnknown([7, 8])], "the job it runs is kept")
        #expect(machine.held.keys.sorted() == [1])
    }

    /// The worker decides a job's retries with the core's decision and ends it in get's words:
    /// a connectivity failure is retried while attempts remain, a refused certificate never, an
    /// error status fails (a retryable one after its attempts, with `Retry-After` spread as the
    /// core spreads it), only a 2xx completes.
    @Test func outcomes() {
        let claimed = job(1)
        var record = claimed.record
        record.spec.retry = JobRetryPolicy(maxAttempts: 2, initialBackoff: 10, jitter: 0)
        let now = Date(timeIntervalSince1970: 1000)
        func outcome(_ result: Result<Response, RequestError>, random: Double = 0) -> JobOutcome {
            DurableWorker.outcome(of: result, job: record, now: now, random: random)
        }
        func response(_ code: Int, _ fields: HTTPFields = [:]) -> Result<Response, RequestError> {
            .success(Response(status: .init(code: code), headerFields: fields, body: Data(), fileURL: nil, effectiveURL: nil,
                              httpVersion: .http1_1, metrics: TransferMetrics(), attempts: 1))
        }
        let failure = RequestError.transport(TransportFailure(code: .init(rawValue: 7), message: "refused"))
        let refused = "could not connect (connection refused, or the host is unreachable)"
        #expect(outcome(.failure(failure)) == .retry(reason: refused, at: now.addingTimeInterval(10), kind: .connect))
        let untrusted = RequestError.transport(TransportFailure(code: .peerFailedVerification, message: "unknown CA"))
        #expect(outcome(.failure(untrusted)).failureKind == .tls)
        #expect(outcome(.failure(untrusted)) == .failed(reason: ErrorWords.describe(untrusted, host: nil), kind: .tls), "never retried")
        #expect(outcome(response(404)) == .failed(reason: "HTTP 404 Not Found", kind: .http))
        #expect(outcome(response(503)) == .retry(reason: "HTTP 503 Service Unavailable", at: now.addingTimeInterval(10), kind: .http))
        // Retry-After 100 s with jitter 0.5: the core's spread, so a fleet told the same does not come back at once.
        record.spec.retry.jitter = 0.5
        let asked = outcome(response(503, [.retryAfter: "100"]), random: 0.5)
        #expect(asked == .retry(reason: "HTTP 503 Service Unavailable, Retry-After 100", at: now.addingTimeInterval(125), kind: .http))
        record.spec.retry.jitter = 0
        if case .completed(let result) = outcome(response(200)) { #expect(result.status == 200) } else { Issue.record("a 200 completes") }
        record.attempt = 2
        #expect(outcome(.failure(failure)) == .failed(reason: refused + " (after 2 attempts)", kind: .connect))
        #expect(outcome(response(503)) == .failed(reason: "HTTP 503 Service Unavailable (after 2 attempts)", kind: .http))
        #expect(outcome(.failure(.cancelled)) == .cancelled(reason: "cancelled"))
        #expect(outcome(.failure(.invalidRequest("x"))) == .failed(reason: "the request cannot be sent: x (after 2 attempts)", kind: .other))
    }
}
