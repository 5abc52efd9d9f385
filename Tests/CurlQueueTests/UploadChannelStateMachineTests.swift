@testable import CurlQueue
import Foundation
import Testing

/// `UploadChannel.StateMachine` driven with plain values: backpressure, pauses, the end, the
/// operation's end, and what a new attempt may do.
@Suite struct UploadChannelStateMachineTests {
    typealias Machine = UploadChannel.StateMachine<String, String, String>
    // Objects kept alive: the identifier of a freed one may be reused by the next.
    let owner = NSObject()
    let stranger = NSObject()
    var operation: ObjectIdentifier { ObjectIdentifier(owner) }

    func machine(length: Int64? = nil, limit: Int = 100, lowWater: Int = 25) -> Machine {
        var machine = Machine(length: length, limit: limit, lowWater: lowWater)
        #expect(machine.attach(operation) == .startProducer)
        return machine
    }

    /// Reads up to `count` bytes; returns the read, the bytes and the writer woken.
    func read(_ machine: inout Machine, _ count: Int, resume: String = "resume") -> (Machine.Read, [UInt8], String?) {
        var bytes = [UInt8](repeating: 0, count: count)
        let (read, wake) = bytes.withUnsafeMutableBytes { machine.read(into: $0, resume: { resume }) }
        if case .bytes(let n, _) = read { bytes = Array(bytes.prefix(n)) } else { bytes = [] }
        return (read, bytes, wake)
    }

    func chunk(_ value: UInt8, _ count: Int) -> Data { Data(repeating: value, count: count) }

    @Test func aProducerWaitsWhileTheBufferIsFullAndIsLetInAtTheLowWater() {
        var machine = machine()
        guard case .accepted(nil) = machine.write(chunk(1, 60), writer: "w1") else { Issue.record("not taken"); return }
        guard case .accepted(nil) = machine.write(chunk(2, 40), writer: "w2") else { Issue.record("not taken"); return }
        // 100 buffered: a further chunk waits.
        guard case .wait = machine.write(chunk(3, 30), writer: "w3") else { Issue.record("did not wait"); return }
        #expect(machine.producerWaits == 1)
        // Down to 50: above the low water, the writer still waits.
        let (first, bytes, woken) = read(&machine, 50)
        #expect(first == .bytes(50, last: false))
        #expect(bytes == [UInt8](repeating: 1, count: 50))
        #expect(woken == nil)
        // Down to 20: its chunk is taken and it is woken.
        let (_, more, wokenNow) = read(&machine, 30)
        #expect(more == [UInt8](repeating: 1, count: 10) + [UInt8](repeating: 2, count: 20))
        #expect(wokenNow == "w3")
        #expect(machine.highWater == 100)
        #expect(machine.taken == 80)
    }

    @Test func anEmptyBufferPausesTheTransferAndTheNextChunkResumesIt() {
        var machine = machine()
        let (paused, _, _) = read(&machine, 10, resume: "unpause")
        #expect(paused == .pause)
        guard case .accepted(let wake) = machine.write(chunk(7, 5), writer: "w") else { Issue.record("not taken"); return }
        #expect(wake == "unpause")
        // Handed out once.
        guard case .accepted(nil) = machine.write(chunk(8, 5), writer: "w") else { Issue.record("not taken"); return }
        #expect(read(&machine, 64).1 == [7, 7, 7, 7, 7, 8, 8, 8, 8, 8])
    }

    @Test func aLargeChunkIsTakenAloneIntoAnEmptyBuffer() {
        var machine = machine(limit: 10, lowWater: 0)
        guard case .accepted = machine.write(chunk(1, 1000), writer: "w") else { Issue.record("not taken"); return }
        guard case .wait = machine.write(chunk(2, 1), writer: "w2") else { Issue.record("did not wait"); return }
        #expect(read(&machine, 999).2 == nil)
        #expect(read(&machine, 1).2 == "w2")
    }

    @Test func theEndComesAfterTheBufferedBytes() {
        var machine = machine()
        _ = machine.write(chunk(1, 3), writer: "w")
        #expect(read(&machine, 10, resume: "r").0 == .bytes(3, last: false))
        #expect(read(&machine, 10, resume: "r").0 == .pause)
        #expect(machine.endOfSequence() == "r")
        #expect(read(&machine, 10).0 == .end)
    }

    @Test func aKnownLengthMarksTheLastBytesAndRefusesMore() {
        var machine = machine(length: 4)
        _ = machine.write(chunk(1, 4), writer: "w")
        #expect(read(&machine, 2).0 == .bytes(2, last: false))
        #expect(read(&machine, 2).0 == .bytes(2, last: true))
        guard case .stop = machine.write(chunk(1, 1), writer: "w") else { Issue.record("a byte past the length was taken"); return }
        guard case .fail(.invalidRequest(let reason)) = read(&machine, 1).0 else { Issue.record("no failure"); return }
        #expect(reason.contains("more than its announced length of 4"))
    }

    @Test func aShortBodyOfKnownLengthFails() {
        var machine = machine(length: 10)
        _ = machine.write(chunk(1, 4), writer: "w")
        _ = machine.endOfSequence()
        guard case .fail(.invalidRequest(let reason)) = read(&machine, 10).0 else { Issue.record("no failure"); return }
        #expect(reason.contains("ended after 4 bytes"))
    }

    @Test func aProducerFailureResumesThePausedTransferToFail() {
        var machine = machine()
        #expect(read(&machine, 10, resume: "r").0 == .pause)
        let failure = RequestError.transport(TransportFailure(code: .readError, message: "broke"))
        #expect(machine.producerFailed(failure) == (true, "r"))
        #expect(read(&machine, 10).0 == .fail(failure))
    }

    @Test func closingStopsTheWaitingProducerAndCancelsItsTask() {
        var machine = machine(limit: 1)
        #expect(machine.producerStarted("task") == nil)
        _ = machine.write(chunk(1, 1), writer: "w1")
        _ = machine.write(chunk(1, 1), writer: "w2")
        let close = machine.close()
        #expect(close?.writers == ["w2"])
        #expect(close?.task == "task")
        #expect(machine.close() == nil)
        guard case .stop(nil) = machine.write(chunk(1, 1), writer: "w3") else { Issue.record("written after the close"); return }
        #expect(read(&machine, 1).0 == .fail(.cancelled))
        // A task made after the close is handed back to be cancelled; a failure after it changes nothing.
        #expect(machine.producerStarted("late") == "late")
        #expect(machine.producerFailed(.cancelled) == (false, nil))
    }

    @Test func aNewAttemptGoesOnOnlyWhileNoByteWasTaken() {
        var machine = machine()
        #expect(machine.attach(operation) == .proceed)
        #expect(machine.rewind(to: 0) == nil)
        guard case .refuse(.invalidRequest(let other)) = machine.attach(ObjectIdentifier(stranger)) else {
            Issue.record("another operation was let in"); return
        }
        #expect(other.contains("another operation"))
        _ = machine.write(chunk(1, 5), writer: "w")
        _ = read(&machine, 1)
        guard case .refuse(.invalidRequest(let reason)) = machine.attach(operation) else { Issue.record("sent again"); return }
        #expect(reason.contains("1 bytes were sent"))
        #expect(machine.rewind(to: 0) != nil)
        #expect(machine.rewind(to: 1) != nil)
    }
}
