@testable import CurlQueue
import CurlQueueTestHelpers
import Foundation
import HTTPTypes
import Testing

/// A body stream's decisions, driven with plain values: waiters and resumes are strings, and
/// the three parties (the producer's offers and end, the consumer, a cancel) come in every order
/// the tests choose.
@Suite struct BodyStreamStateMachineTests {
    typealias Machine = BodyStream.StateMachine<String, String, String, String>

    let head = ResponseHead(status: .ok, headerFields: [.contentType: "text/plain"])
    let otherHead = ResponseHead(status: .notFound, headerFields: [:])

    func bytes(_ count: Int) -> Data { Data(repeating: 7, count: count) }

    /// Offers `count` bytes with `resume`; the copy is counted to show it happens only when taken.
    func offer(_ machine: inout Machine, _ count: Int, resume: String = "resume", copies: inout Int) -> Machine.Offer {
        machine.offer(count: count, resume: resume) {
            copies += 1
            return bytes(count)
        }
    }

    func pull(limit: Int = 100, lowWater: Int = 25) -> Machine { Machine(keepsChunks: true, limit: limit, lowWater: lowWater) }
    func push(limit: Int = 100, lowWater: Int = 25) -> Machine { Machine(keepsChunks: false, limit: limit, lowWater: lowWater) }

    func value(_ next: (value: Result<Data?, RequestError>?, resume: String?)) -> Result<Data?, RequestError>? { next.value }

    // The mutating calls, as functions, for use inside #expect (which cannot mutate a member).
    func headOf(_ machine: inout Machine, _ waiter: String) -> Result<ResponseHead, RequestError>? { machine.head(orWait: waiter) }
    func nextOf(_ machine: inout Machine, _ waiter: String) -> (value: Result<Data?, RequestError>?, resume: String?) { machine.next(orWait: waiter) }
    func consumedOf(_ machine: inout Machine, _ count: Int) -> String? { machine.consumed(count) }
    func pausedOf(_ machine: inout Machine, _ waiter: String) -> Bool { machine.pausedOrEnded(orWait: waiter) }

    // MARK: The head

    @Test func theHeadIsHandedOverOnceToTheConsumerWaitingForIt() {
        var machine = pull()
        #expect(headOf(&machine, "h1") == nil)
        guard case .handOver(let handed, to: "h1") = machine.begin(head) else { Issue.record("expected a hand-over to h1"); return }
        #expect(handed == head)
        guard case .ignored = machine.begin(otherHead) else { Issue.record("a second head is ignored"); return }
        #expect(machine.head == head)
        // A consumer that comes later gets it at once.
        #expect(headOf(&machine, "h2") == .success(head))
    }

    @Test func aHeadAfterTheEndIsIgnored() {
        var machine = pull()
        _ = machine.finish(.failure(.cancelled))
        guard case .ignored = machine.begin(head) else { Issue.record("no head after the end"); return }
        #expect(machine.head == nil)
    }

    @Test func anEndBeforeTheHeadFailsTheConsumerWaitingForIt() {
        var machine = pull()
        #expect(headOf(&machine, "h") == nil)
        let finish = machine.finish(.failure(.fileSystem("stalled")))
        #expect(finish?.headWaiter?.0 == "h")
        #expect(finish?.headWaiter?.1 == .failure(.fileSystem("stalled")))
        // And a later consumer too.
        #expect(headOf(&machine, "late") == .failure(.fileSystem("stalled")))
    }

    @Test func aSuccessBeforeTheHeadWasHandedOverBringsItsHeadAndBody() {
        // Pull: the waiting consumer gets the head; the body is the iterator's last chunk.
        var pulled = pull()
        #expect(headOf(&pulled, "h") == nil)
        let pulledFinish = pulled.finish(.success((head: head, body: bytes(10))))
        #expect(pulledFinish?.headWaiter?.1 == .success(head))
        #expect(pulledFinish?.beginsNow == nil)
        #expect(pulledFinish?.trailing == nil)
        #expect(value(nextOf(&pulled, "n")) == .success(bytes(10)))
        #expect(value(nextOf(&pulled, "n")) == .success(nil))

        // Push: the head and the body go to the handlers.
        var pushed = push()
        let pushedFinish = pushed.finish(.success((head: head, body: bytes(10))))
        #expect(pushedFinish?.beginsNow == head)
        #expect(pushedFinish?.trailing == bytes(10))

        // A head handed over before is not handed over again.
        var begun = push()
        _ = begun.begin(head)
        let begunFinish = begun.finish(.success((head: otherHead, body: Data())))
        #expect(begunFinish?.beginsNow == nil)
        #expect(begunFinish?.trailing == nil)
        #expect(begun.head == head)
    }

    // MARK: Offers and backpressure

    @Test func aPullStreamKeepsChunksUpToTheLimitThenPauses() {
        var machine = pull(limit: 100, lowWater: 25)
        var copies = 0
        _ = machine.begin(head)
        guard case .kept = offer(&machine, 60, copies: &copies) else { Issue.record("kept"); return }
        guard case .kept = offer(&machine, 40, copies: &copies) else { Issue.record("kept: exactly at the limit"); return }
        #expect(machine.outstanding == 100)
        guard case .pause(waking: []) = offer(&machine, 1, resume: "r1", copies: &copies) else { Issue.record("paused"); return }
        #expect(copies == 2, "a refused chunk is not copied")
        #expect(machine.pauseCount == 1)
        #expect(machine.highWater == 100)
        // Taking the first chunk leaves 40: above the low water, no resume yet.
        let first = machine.next(orWait: "n")
        #expect(first.value == .success(bytes(60)))
        #expect(first.resume == nil)
        // Taking the second drains it: the resume is handed out, once.
        let second = machine.next(orWait: "n")
        #expect(second.value == .success(bytes(40)))
        #expect(second.resume == "r1")
        #expect(nextOf(&machine, "n").resume == nil)
    }

    @Test func oneChunkIsTakenWhenNothingIsOutstandingHoweverLarge() {
        var machine = pull(limit: 100)
        var copies = 0
        guard case .kept = offer(&machine, 1_000, copies: &copies) else { Issue.record("a lone chunk is always taken"); return }
        #expect(machine.highWater == 1_000)
        guard case .pause = offer(&machine, 1, copies: &copies) else { Issue.record("then anything more waits"); return }
    }

    @Test func aWaitingIteratorIsHandedTheChunkAtOnce() {
        var machine = pull()
        var copies = 0
        #expect(value(nextOf(&machine, "n")) == nil)
        guard case .hand(let chunk, to: "n") = offer(&machine, 10, copies: &copies) else { Issue.record("handed to n"); return }
        #expect(chunk == bytes(10))
        #expect(machine.outstanding == 0, "a chunk handed to a waiting iterator is consumed")
        // The waiter was used up: the next chunk is kept.
        guard case .kept = offer(&machine, 10, copies: &copies) else { Issue.record("kept"); return }
    }

    @Test func aPushStreamDispatchesAndResumesWhenItsHandlersCatchUp() {
        var machine = push(limit: 100, lowWater: 25)
        var copies = 0
        guard case .dispatch(let chunk) = offer(&machine, 80, copies: &copies) else { Issue.record("dispatched"); return }
        #expect(chunk.count == 80)
        guard case .pause = offer(&machine, 30, resume: "r", copies: &copies) else { Issue.record("paused"); return }
        #expect(consumedOf(&machine, 50) == nil, "30 outstanding: above the low water")
        #expect(consumedOf(&machine, 30) == "r")
        #expect(consumedOf(&machine, 0) == nil, "the resume is handed out once")
        #expect(machine.outstanding == 0)
    }

    @Test func aRefusalAfterARefusalKeepsTheNewestResume() {
        // curl_easy_pause(CONT) may call the write callback at once, which may be refused again.
        var machine = push(limit: 10, lowWater: 0)
        var copies = 0
        _ = offer(&machine, 10, copies: &copies)
        guard case .pause = offer(&machine, 5, resume: "r1", copies: &copies) else { Issue.record("paused"); return }
        guard case .pause = offer(&machine, 5, resume: "r2", copies: &copies) else { Issue.record("paused again"); return }
        #expect(machine.pauseCount == 2)
        #expect(consumedOf(&machine, 10) == "r2")
    }

    @Test func pauseWaitersAreWokenByARefusalOrTheEnd() {
        var machine = push(limit: 10, lowWater: 0)
        var copies = 0
        #expect(!pausedOf(&machine, "p1"))
        _ = offer(&machine, 10, copies: &copies)
        guard case .pause(waking: ["p1"]) = offer(&machine, 1, copies: &copies) else { Issue.record("p1 woken"); return }
        #expect(pausedOf(&machine, "p2"), "paused: no wait")
        _ = machine.consumed(10)
        #expect(!pausedOf(&machine, "p3"))
        let finish = machine.finish(.success((head: head, body: Data())))
        #expect(finish?.pauseWaiters == ["p3"])
        #expect(pausedOf(&machine, "p4"), "ended: no wait")
    }

    // MARK: The end, and the races with it

    @Test func offersAfterTheEndAreDroppedAndNoResumeComesOut() {
        var machine = push(limit: 10, lowWater: 0)
        var copies = 0
        _ = offer(&machine, 10, copies: &copies)
        guard case .pause = offer(&machine, 5, resume: "r", copies: &copies) else { Issue.record("paused"); return }
        _ = machine.finish(.failure(.cancelled))
        guard case .dropped = offer(&machine, 5, copies: &copies) else { Issue.record("dropped after the end"); return }
        #expect(copies == 1)
        #expect(consumedOf(&machine, 10) == nil, "a cancelled stream never unpauses its transfer")
    }

    @Test func theStreamEndsOnceWhateverComesSecond() {
        var machine = pull()
        let first = machine.finish(.failure(.cancelled))
        let second = machine.finish(.success((head: head, body: bytes(3))))
        let third = machine.finish(.failure(.fileSystem("late")))
        #expect(first != nil && second == nil && third == nil)
        #expect(value(nextOf(&machine, "n")) == .failure(.cancelled))
    }

    @Test func anIteratorGetsTheChunksThenTheErrorOnceThenTheEnd() {
        var machine = pull()
        var copies = 0
        _ = machine.begin(head)
        _ = offer(&machine, 10, copies: &copies)
        _ = offer(&machine, 20, copies: &copies)
        _ = machine.finish(.failure(.fileSystem("stalled")))
        #expect(value(nextOf(&machine, "n")) == .success(bytes(10)))
        #expect(value(nextOf(&machine, "n")) == .success(bytes(20)))
        #expect(value(nextOf(&machine, "n")) == .failure(.fileSystem("stalled")))
        #expect(value(nextOf(&machine, "n")) == .success(nil))
        #expect(value(nextOf(&machine, "n")) == .success(nil))
    }

    @Test func aCancelDropsTheChunksNotYetTaken() {
        var machine = pull()
        var copies = 0
        _ = machine.begin(head)
        _ = offer(&machine, 10, copies: &copies)
        _ = machine.finish(.failure(.cancelled))
        #expect(machine.outstanding == 0)
        #expect(value(nextOf(&machine, "n")) == .failure(.cancelled))
        #expect(value(nextOf(&machine, "n")) == .success(nil))
    }

    @Test func theEndResumesTheWaitingIteratorExactlyOnce() {
        // Waiting for a chunk when the body completes: the end.
        var complete = pull()
        _ = complete.begin(head)
        #expect(value(nextOf(&complete, "n")) == nil)
        let completed = complete.finish(.success((head: head, body: Data())))
        #expect(completed?.chunkWaiter?.0 == "n")
        #expect(completed?.chunkWaiter?.1 == .success(nil))

        // Waiting when a body kept in memory comes with the end: that body first.
        var kept = pull()
        #expect(value(nextOf(&kept, "n")) == nil)
        let withBody = kept.finish(.success((head: head, body: bytes(4))))
        #expect(withBody?.chunkWaiter?.1 == .success(bytes(4)))
        #expect(value(nextOf(&kept, "n2")) == .success(nil))

        // Waiting when the transfer fails: the error, once.
        var failed = pull()
        _ = failed.begin(head)
        #expect(value(nextOf(&failed, "n")) == nil)
        let failure = failed.finish(.failure(.fileSystem("stalled")))
        #expect(failure?.chunkWaiter?.1 == .failure(.fileSystem("stalled")))
        #expect(value(nextOf(&failed, "n2")) == .success(nil))
    }

    /// Random interleavings of a producer's offers, a consumer's takes and one end (a cancel or a
    /// completion), from seeded random sources: every byte accepted is taken once and in order
    /// (all of them after a completion), a resume comes out only for the latest refusal, at most
    /// once and never after the end, and the consumer sees one end.
    @Test(arguments: 0..<300)
    func randomInterleavingsKeepEveryPromise(seed: Int) {
        var random = SeededGenerator(seed: UInt64(seed))  // HTTPClientJSONValidatorTests.swift
        var machine = pull(limit: 64, lowWater: 16)
        var accepted = Data(), taken = Data()
        var nextByte = 0
        var paused: String?  // the refused offer's resume, until it comes out
        var waiting = false  // the consumer waits for a chunk
        var ended: Bool?  // nil while open; true for a cancel
        var ends = 0
        _ = machine.begin(head)

        func record(_ value: Result<Data?, RequestError>) {
            switch value {
            case .success(let chunk?): taken += chunk
            case .success(nil), .failure: ends += 1
            }
        }
        for step in 0..<300 {
            switch random.next() % 3 {
            case 0 where paused == nil:  // libcurl offers only while the transfer is not paused
                let count = Int(random.next() % 40) + 1
                let chunk = Data((0..<count).map { UInt8(truncatingIfNeeded: nextByte + $0) })
                switch machine.offer(count: count, resume: "r\(step)", chunk: { chunk }) {
                case .kept:
                    #expect(!waiting)
                    accepted += chunk
                case .hand(let handed, _):
                    #expect(waiting)
                    waiting = false
                    accepted += chunk
                    taken += handed
                case .pause:
                    #expect(ended == nil)
                    paused = "r\(step)"
                case .dropped:
                    #expect(ended != nil, "only an ended stream drops")
                case .dispatch:
                    Issue.record("a pull stream never dispatches")
                }
                nextByte += count
            case 1 where !waiting && ends == 0:  // an iterator stops at the end
                let (value, resume) = machine.next(orWait: "n")
                if let resume {
                    #expect(resume == paused && ended == nil)
                    paused = nil
                }
                if let value { record(value) } else { waiting = true }
            case 2 where ended == nil && random.next() % 6 == 0:
                let cancel = random.next() % 2 == 0
                ended = cancel
                let finish = machine.finish(cancel ? .failure(.cancelled) : .success((head: head, body: Data())))
                if let (_, value) = finish?.chunkWaiter {
                    #expect(waiting)
                    waiting = false
                    record(value)
                }
            default:
                break
            }
        }
        guard let cancelled = ended else {
            #expect(ends == 0)
            return
        }
        while ends == 0, !waiting {
            let (value, resume) = machine.next(orWait: "n")
            #expect(resume == nil, "no resume after the end")
            if let value { record(value) } else { waiting = true }
        }
        #expect(!waiting, "an ended stream never makes the consumer wait")
        #expect(ends == 1)
        #expect(accepted.starts(with: taken), "bytes are taken once, in order")
        if !cancelled { #expect(taken == accepted, "a completed stream hands over every byte") }
    }
}
