@testable import CurlQueue
import CurlQueueTestHelpers
import Foundation
import Testing

/// The queue's ordering and limits, driven by hand: no I/O, no threads, no timing.
@Suite struct QueueSchedulerTests {
    typealias Scheduler = RequestQueue.Scheduler<Int, Void>

    static let low = RequestOperation.Priority.low.rawValue
    static let normal = RequestOperation.Priority.normal.rawValue
    static let high = RequestOperation.Priority.high.rawValue

    func scheduler(limit: Int, perHost: Int = 0, lifo: Bool = false, suspended: Bool = false) -> Scheduler {
        var scheduler = Scheduler()
        scheduler.maxConcurrent = limit
        scheduler.setMaxPerHost(perHost)
        scheduler.lifo = lifo
        scheduler.isSuspended = suspended
        return scheduler
    }

    /// Finishes whatever runs, one start at a time, and returns the order everything started in.
    func runOneByOne(_ scheduler: inout Scheduler) -> [Int] {
        var order: [Int] = []
        var running = scheduler.nextToStart()
        while !running.isEmpty {
            #expect(running.count == 1)
            order += running
            for id in running { scheduler.remove(id) }
            running = scheduler.nextToStart()
        }
        return order
    }

    // MARK: Order

    @Test func firstInFirstOutStartsTheBacklogInAddOrder() {
        var scheduler = scheduler(limit: 1)
        for id in 1...6 { scheduler.add(id, priority: Self.normal, host: "a") }
        #expect(runOneByOne(&scheduler) == [1, 2, 3, 4, 5, 6])
        #expect(scheduler.count == 0)
    }

    @Test func lastInFirstOutStartsTheNewestOfTheBacklogFirstAndLeavesTheRunningOneAlone() {
        var scheduler = scheduler(limit: 1, lifo: true)
        scheduler.add(1, priority: Self.normal, host: "a")
        #expect(scheduler.nextToStart() == [1])
        for id in 2...6 { scheduler.add(id, priority: Self.normal, host: "a") }
        #expect(scheduler.nextToStart() == [])  // 1 still runs
        #expect(scheduler.orderedIDs() == [1, 6, 5, 4, 3, 2])
        scheduler.remove(1)
        #expect(runOneByOne(&scheduler) == [6, 5, 4, 3, 2])
    }

    @Test func lastInFirstOutPutsItemsAddedLaterAheadOfTheRemainingBacklog() {
        var scheduler = scheduler(limit: 1, lifo: true)
        for id in 1...3 { scheduler.add(id, priority: Self.normal, host: "a") }
        #expect(scheduler.nextToStart() == [3])
        scheduler.add(4, priority: Self.normal, host: "a")
        scheduler.remove(3)
        #expect(runOneByOne(&scheduler) == [4, 2, 1])
    }

    @Test func highStartsBeforeNormalBeforeLowWhateverTheAddOrder() {
        var scheduler = scheduler(limit: 1, suspended: true)
        let priorities = [Self.low, Self.normal, Self.high, Self.low, Self.high, Self.normal]
        for (id, priority) in priorities.enumerated() { scheduler.add(id, priority: priority, host: "a") }
        scheduler.isSuspended = false
        #expect(runOneByOne(&scheduler) == [2, 4, 1, 5, 0, 3])
    }

    @Test func theModeOrdersItemsWithinOnePriority() {
        var scheduler = scheduler(limit: 1, lifo: true, suspended: true)
        let priorities = [Self.low, Self.normal, Self.high, Self.low, Self.high, Self.normal]
        for (id, priority) in priorities.enumerated() { scheduler.add(id, priority: priority, host: "a") }
        scheduler.isSuspended = false
        #expect(runOneByOne(&scheduler) == [4, 2, 5, 1, 3, 0])
    }

    @Test func switchingTheModeMidBacklogKeepsPriorityFirstThenEachItemsPlace() {
        var scheduler = scheduler(limit: 1, suspended: true)
        // 0, 1, 2 join at the back; in last-in-first-out mode 3, 4, 5 join at the front.
        for (id, priority) in [(0, Self.normal), (1, Self.low), (2, Self.high)] { scheduler.add(id, priority: priority, host: "a") }
        scheduler.lifo = true
        for (id, priority) in [(3, Self.normal), (4, Self.low), (5, Self.high)] { scheduler.add(id, priority: priority, host: "a") }
        scheduler.lifo = false
        scheduler.add(6, priority: Self.normal, host: "a")
        #expect(scheduler.orderedIDs() == [5, 2, 3, 0, 6, 4, 1])
        scheduler.isSuspended = false
        #expect(runOneByOne(&scheduler) == [5, 2, 3, 0, 6, 4, 1])
    }

    @Test func aHighPriorityItemAddedLaterOvertakesTheBacklogButNotTheRunningOnes() {
        var scheduler = scheduler(limit: 2)
        for id in 1...4 { scheduler.add(id, priority: Self.normal, host: "a") }
        #expect(scheduler.nextToStart() == [1, 2])
        scheduler.add(5, priority: Self.high, host: "a")
        #expect(scheduler.nextToStart() == [])
        #expect(scheduler.orderedIDs() == [1, 2, 5, 3, 4])
        scheduler.remove(2)
        #expect(scheduler.nextToStart() == [5])
    }

    // MARK: Limits

    @Test func neverMoreThanTheLimitRun() {
        var scheduler = scheduler(limit: 3)
        for id in 0..<10 { scheduler.add(id, priority: Self.normal, host: "a") }
        #expect(scheduler.nextToStart() == [0, 1, 2])
        #expect(scheduler.nextToStart() == [])
        #expect(scheduler.runningCount == 3)
        #expect(scheduler.pendingCount == 7)
        #expect(scheduler.isRunning(2))
        #expect(!scheduler.isRunning(3))
        #expect(!scheduler.isRunning(99))
        scheduler.add(10, priority: Self.high, host: "a")
        #expect(scheduler.nextToStart() == [])
        #expect(scheduler.runningCount == 3)
    }

    @Test func aLimitOfZeroMeansNoLimit() {
        var scheduler = scheduler(limit: 0)
        for id in 0..<1000 { scheduler.add(id, priority: Self.normal, host: "a") }
        #expect(scheduler.nextToStart() == Array(0..<1000))
        #expect(scheduler.runningCount == 1000)
        #expect(scheduler.pendingCount == 0)
    }

    @Test func raisingTheLimitStartsMoreAtOnce() {
        var scheduler = scheduler(limit: 1)
        for id in 0..<5 { scheduler.add(id, priority: Self.normal, host: "a") }
        #expect(scheduler.nextToStart() == [0])
        scheduler.maxConcurrent = 3
        #expect(scheduler.nextToStart() == [1, 2])
        scheduler.maxConcurrent = 0
        #expect(scheduler.nextToStart() == [3, 4])
    }

    @Test func loweringTheLimitLetsRunningItemsFinishAndStartsNothingUntilBelowIt() {
        var scheduler = scheduler(limit: 4)
        for id in 0..<8 { scheduler.add(id, priority: Self.normal, host: "a") }
        #expect(scheduler.nextToStart() == [0, 1, 2, 3])
        scheduler.maxConcurrent = 2
        #expect(scheduler.nextToStart() == [])
        #expect(scheduler.runningCount == 4)  // nothing is stopped
        scheduler.remove(0)
        #expect(scheduler.nextToStart() == [])  // 3 running, limit 2
        scheduler.remove(1)
        #expect(scheduler.nextToStart() == [])  // 2 running
        scheduler.remove(2)
        #expect(scheduler.nextToStart() == [4])
        #expect(scheduler.runningCount == 2)
    }

    @Test func suspensionHoldsNewStartsAndResumingStartsAtOnce() {
        var scheduler = scheduler(limit: 2)
        scheduler.add(0, priority: Self.normal, host: "a")
        #expect(scheduler.nextToStart() == [0])
        scheduler.isSuspended = true
        for id in 1...3 { scheduler.add(id, priority: Self.normal, host: "a") }
        #expect(scheduler.nextToStart() == [])
        scheduler.remove(0)  // a running one finishes while suspended: its slot stays free
        #expect(scheduler.nextToStart() == [])
        #expect(scheduler.runningCount == 0)
        scheduler.isSuspended = false
        #expect(scheduler.nextToStart() == [1, 2])
    }

    // MARK: Per-host limits

    @Test func aHostAtItsLimitWaitsWhileOtherHostsGoAhead() {
        var scheduler = scheduler(limit: 0, perHost: 2)
        for id in 0..<5 { scheduler.add(id, priority: Self.normal, host: "a") }
        for id in 5..<8 { scheduler.add(id, priority: Self.normal, host: "b") }
        #expect(scheduler.nextToStart() == [0, 1, 5, 6])
        #expect(scheduler.pendingCount == 4)
    }

    @Test func aParkedItemStartsWhenItsHostFreesASlot() {
        var scheduler = scheduler(limit: 0, perHost: 1)
        for id in 0..<3 { scheduler.add(id, priority: Self.normal, host: "a") }
        scheduler.add(3, priority: Self.normal, host: "b")
        #expect(scheduler.nextToStart() == [0, 3])
        scheduler.remove(3)  // another host's slot: nothing of host a may start
        #expect(scheduler.nextToStart() == [])
        scheduler.remove(0)
        #expect(scheduler.nextToStart() == [1])
        scheduler.remove(1)
        #expect(scheduler.nextToStart() == [2])
    }

    @Test func aParkedItemKeepsItsPlaceAheadOfLaterItemsOfOtherHosts() {
        var scheduler = scheduler(limit: 2, perHost: 1)
        for id in 0..<3 { scheduler.add(id, priority: Self.normal, host: "a") }
        scheduler.add(3, priority: Self.normal, host: "b")
        scheduler.add(4, priority: Self.normal, host: "c")
        #expect(scheduler.nextToStart() == [0, 3])  // 1 and 2 parked under a, 4 waits for a slot
        scheduler.remove(0)
        #expect(scheduler.nextToStart() == [1])
        scheduler.remove(3)
        #expect(scheduler.nextToStart() == [4])
        scheduler.remove(1)
        #expect(scheduler.nextToStart() == [2])
    }

    @Test func aReleasedParkedItemWaitingForTheOverallLimitIsNotLost() {
        var scheduler = scheduler(limit: 2, perHost: 1)
        scheduler.add(0, priority: Self.normal, host: "a")
        scheduler.add(1, priority: Self.normal, host: "a")
        scheduler.add(2, priority: Self.normal, host: "b")
        #expect(scheduler.nextToStart() == [0, 2])  // 1 parked
        scheduler.maxConcurrent = 1
        scheduler.remove(0)  // releases 1, but 2 still fills the only slot
        #expect(scheduler.nextToStart() == [])
        scheduler.remove(2)
        #expect(scheduler.nextToStart() == [1])
    }

    @Test func raisingThePerHostLimitReleasesParkedItems() {
        var scheduler = scheduler(limit: 0, perHost: 1)
        for id in 0..<4 { scheduler.add(id, priority: Self.normal, host: "a") }
        #expect(scheduler.nextToStart() == [0])
        scheduler.setMaxPerHost(3)
        #expect(scheduler.nextToStart() == [1, 2])
        scheduler.setMaxPerHost(0)
        #expect(scheduler.nextToStart() == [3])
    }

    @Test func parkedItemsKeepTheirPriorityOrder() {
        var scheduler = scheduler(limit: 0, perHost: 1)
        scheduler.add(0, priority: Self.normal, host: "a")
        #expect(scheduler.nextToStart() == [0])
        scheduler.add(1, priority: Self.low, host: "a")
        scheduler.add(2, priority: Self.normal, host: "a")
        scheduler.add(3, priority: Self.high, host: "a")
        #expect(scheduler.nextToStart() == [])
        var order: [Int] = []
        var running = 0
        for _ in 0..<3 {
            scheduler.remove(running)
            let started = scheduler.nextToStart()
            #expect(started.count == 1)
            running = started.first ?? -1
            order.append(running)
        }
        #expect(order == [3, 2, 1])
    }

    @Test func aRemovedParkedItemIsSkippedWhenItsHostFreesASlot() {
        var scheduler = scheduler(limit: 0, perHost: 1)
        for id in 0..<3 { scheduler.add(id, priority: Self.normal, host: "a") }
        scheduler.add(3, priority: Self.normal, host: "b")
        #expect(scheduler.nextToStart() == [0, 3])  // 1 and 2 parked
        scheduler.remove(1)
        scheduler.remove(0)
        #expect(scheduler.nextToStart() == [2])
    }

    @Test func theOriginIsSchemeHostAndPort() {
        let origin = { (string: String) in RequestQueue.origin(of: URL(string: string)!) }
        #expect(origin("http://Example.com/a") == origin("http://example.com:80/b?c=d"))
        #expect(origin("https://example.com/") == origin("https://example.com:443/x"))
        #expect(origin("http://127.0.0.1:8080/") != origin("http://127.0.0.1:8081/"))
        #expect(origin("http://example.com/") != origin("https://example.com/"))
        #expect(origin("http://example.com:443/") != origin("https://example.com/"))
    }

    @Test func anItemAddedWithoutItsHostIsAskedForItOnceWhenItStartsOrParks() {
        var scheduler = scheduler(limit: 0, perHost: 1)
        for id in 0..<5 { scheduler.add(id, priority: Self.normal) }
        scheduler.remove(4)  // never starts: its host is never asked for
        var asked: [Int] = []
        let host = { (id: Int) -> String in
            asked.append(id)
            return id < 2 ? "a" : "b"
        }
        #expect(scheduler.nextToStart(hostOf: host) == [0, 2])  // 1 and 3 parked
        #expect(asked == [0, 1, 2, 3])
        #expect(scheduler.orderedIDs() == [0, 2, 1, 3])
        scheduler.remove(2)
        #expect(scheduler.nextToStart(hostOf: host) == [3])
        scheduler.remove(0)
        #expect(scheduler.nextToStart(hostOf: host) == [1])
        #expect(asked == [0, 1, 2, 3])
        scheduler.remove(1)
        scheduler.remove(3)
        #expect(scheduler.count == 0)
    }

    @Test func withNoPerHostLimitNoHostIsAskedFor() {
        var scheduler = scheduler(limit: 2)
        for id in 0..<4 { scheduler.add(id, priority: Self.normal) }
        var asked: [Int] = []
        let host = { (id: Int) -> String in
            asked.append(id)
            return "a"
        }
        #expect(scheduler.nextToStart(hostOf: host) == [0, 1])
        scheduler.remove(1)
        #expect(scheduler.nextToStart(hostOf: host) == [2])
        #expect(asked == [])
    }

    @Test func aPerHostLimitSetWhileItemsWithoutHostsRunCountsThem() {
        var scheduler = scheduler(limit: 0)
        for id in 0..<4 { scheduler.add(id, priority: Self.normal) }
        var asked: [Int] = []
        let host = { (id: Int) -> String in
            asked.append(id)
            return id == 3 || id == 5 ? "b" : "a"
        }
        #expect(scheduler.nextToStart(hostOf: host) == [0, 1, 2, 3])
        #expect(asked == [])
        scheduler.setMaxPerHost(2, hostOf: host)  // a runs 0, 1 and 2; b runs 3
        #expect(asked.sorted() == [0, 1, 2, 3])
        scheduler.add(4, priority: Self.normal)  // a
        scheduler.add(5, priority: Self.normal)  // b
        #expect(scheduler.nextToStart(hostOf: host) == [5])  // 4 parked: a is over its limit
        scheduler.remove(0)
        #expect(scheduler.nextToStart(hostOf: host) == [])  // a still runs two
        scheduler.remove(1)
        #expect(scheduler.nextToStart(hostOf: host) == [4])
        #expect(asked.sorted() == [0, 1, 2, 3, 4, 5])
        for id in [2, 3, 4, 5] { #expect(scheduler.remove(id) == true) }
        #expect(scheduler.count == 0)
        #expect(scheduler.runningCount == 0)
    }

    @Test func aPerHostLimitRemovedAndSetAgainCountsEveryRunningItemOnce() {
        var scheduler = scheduler(limit: 0, perHost: 1)
        var asked: [Int] = []
        let host = { (id: Int) -> String in
            asked.append(id)
            return id == 4 ? "b" : "a"
        }
        scheduler.add(0, priority: Self.normal)
        scheduler.add(1, priority: Self.normal)
        #expect(scheduler.nextToStart(hostOf: host) == [0])  // 1 parked
        #expect(asked == [0, 1])
        scheduler.setMaxPerHost(0, hostOf: host)
        #expect(scheduler.nextToStart(hostOf: host) == [1])
        scheduler.add(2, priority: Self.normal)
        #expect(scheduler.nextToStart(hostOf: host) == [2])
        #expect(asked == [0, 1])  // 2 started without its host
        scheduler.setMaxPerHost(1, hostOf: host)  // a runs 0, 1 and 2
        #expect(asked == [0, 1, 2])  // only 2 had no host yet
        scheduler.add(3, priority: Self.normal)  // a
        scheduler.add(4, priority: Self.normal)  // b
        #expect(scheduler.nextToStart(hostOf: host) == [4])
        scheduler.remove(0)
        scheduler.remove(1)
        #expect(scheduler.nextToStart(hostOf: host) == [])  // a still runs 2
        scheduler.remove(2)
        #expect(scheduler.nextToStart(hostOf: host) == [3])
        // Off and on again with every running item holding its host: nothing is asked for.
        scheduler.setMaxPerHost(0, hostOf: host)
        scheduler.setMaxPerHost(1, hostOf: host)
        #expect(asked == [0, 1, 2, 3, 4])
        scheduler.add(5, priority: Self.normal)  // a
        #expect(scheduler.nextToStart(hostOf: host) == [])
        scheduler.remove(3)
        #expect(scheduler.nextToStart(hostOf: host) == [5])
    }

    @Test func removingRunningItemsStartedWithNoPerHostLimitFreesTheirSlots() {
        var scheduler = scheduler(limit: 2)
        for id in 0..<5 { scheduler.add(id, priority: Self.normal) }
        let noHost = { (id: Int) -> String in
            Issue.record("asked for the host of \(id) with no per-host limit")
            return "a"
        }
        #expect(scheduler.nextToStart(hostOf: noHost) == [0, 1])
        #expect(scheduler.remove(0) == true)
        #expect(scheduler.nextToStart(hostOf: noHost) == [2])
        #expect(scheduler.remove(1) == true)
        #expect(scheduler.remove(2) == true)
        #expect(scheduler.runningCount == 0)
        // A limit set now has no running item to count: the next two start on one host.
        scheduler.setMaxPerHost(2, hostOf: noHost)
        #expect(scheduler.nextToStart(hostOf: { _ in "a" }) == [3, 4])
        scheduler.setMaxPerHost(0, hostOf: noHost)
        #expect(scheduler.remove(3) == true)
        #expect(scheduler.remove(4) == true)
        #expect(scheduler.count == 0)
        #expect(scheduler.runningCount == 0)
    }

    @Test func orderedIDsListParkedItemsInTheirStartOrder() {
        var scheduler = scheduler(limit: 0, perHost: 1)
        scheduler.add(0, priority: Self.normal, host: "a")
        scheduler.add(1, priority: Self.normal, host: "a")
        scheduler.add(2, priority: Self.low, host: "b")
        scheduler.add(3, priority: Self.high, host: "a")
        #expect(scheduler.nextToStart() == [3, 2])  // 0 and 1 parked under a
        scheduler.add(4, priority: Self.high, host: "c")  // not looked at yet
        #expect(scheduler.orderedIDs() == [3, 2, 4, 0, 1])
        scheduler.remove(0)
        #expect(scheduler.orderedIDs() == [3, 2, 4, 1])
        scheduler.remove(3)
        #expect(scheduler.nextToStart() == [4, 1])
        #expect(scheduler.orderedIDs() == [2, 4, 1])
    }

    // MARK: Removal

    @Test func removingPendingItemsFreesNothingAndTheyNeverStart() {
        var scheduler = scheduler(limit: 2)
        for id in 0..<6 { scheduler.add(id, priority: Self.normal, host: "a") }
        #expect(scheduler.nextToStart() == [0, 1])
        #expect(scheduler.remove(2) == false)
        #expect(scheduler.remove(4) == false)
        #expect(scheduler.nextToStart() == [])  // no slot was freed
        #expect(scheduler.count == 4)
        #expect(!scheduler.contains(2))
        #expect(runOneByOneAfterFinishing([0, 1], &scheduler) == [3, 5])
    }

    /// Finishes `running`, then runs the rest to the end; returns the order the rest started in.
    func runOneByOneAfterFinishing(_ running: [Int], _ scheduler: inout Scheduler) -> [Int] {
        var order: [Int] = []
        var running = running
        while !running.isEmpty {
            scheduler.remove(running.removeFirst())
            let started = scheduler.nextToStart()
            order += started
            running += started
        }
        return order
    }

    @Test func removingARunningItemFreesItsSlot() {
        var scheduler = scheduler(limit: 2)
        for id in 0..<4 { scheduler.add(id, priority: Self.normal, host: "a") }
        #expect(scheduler.nextToStart() == [0, 1])
        #expect(scheduler.remove(1) == true)
        #expect(scheduler.nextToStart() == [2])
        #expect(scheduler.remove(42) == false)  // unknown: nothing happens
        #expect(scheduler.nextToStart() == [])
        #expect(scheduler.runningCount == 2)
    }

    @Test func removingEveryPendingItemThenAddingAgainStartsOnlyTheNewOnes() {
        var scheduler = scheduler(limit: 1)
        for id in 0..<4 { scheduler.add(id, priority: Self.normal, host: "a") }
        #expect(scheduler.nextToStart() == [0])
        for id in 1..<4 { scheduler.remove(id) }
        scheduler.add(2, priority: Self.normal, host: "a")  // the same ID again, as a new item
        scheduler.add(7, priority: Self.normal, host: "a")
        #expect(runOneByOneAfterFinishing([0], &scheduler) == [2, 7])
    }

    @Test func anIDRemovedAndAddedAgainStartsOnceAtItsNewPlace() {
        var scheduler = scheduler(limit: 1)
        for id in 0..<4 { scheduler.add(id, priority: Self.normal, host: "a") }
        #expect(scheduler.nextToStart() == [0])
        scheduler.remove(1)
        scheduler.remove(2)
        scheduler.add(2, priority: Self.normal, host: "a")  // behind 3 now
        scheduler.add(7, priority: Self.normal, host: "a")
        #expect(runOneByOneAfterFinishing([0], &scheduler) == [3, 2, 7])
    }

    @Test func anIDIsInTheQueueOnlyOnce() {
        var scheduler = scheduler(limit: 1)
        let added = scheduler.add(1, priority: Self.normal, host: "a")
        let addedAgain = scheduler.add(1, priority: Self.high, host: "b")
        #expect(added)
        #expect(!addedAgain)
        #expect(scheduler.count == 1)
        #expect(scheduler.nextToStart() == [1])
        let addedWhileRunning = scheduler.add(1, priority: Self.normal, host: "a")
        #expect(!addedWhileRunning)
    }

    @Test func removeAllReturnsRunningThenPendingAndKeepsTheSettings() {
        var scheduler = scheduler(limit: 2, perHost: 5, lifo: true)
        for id in 0..<5 { scheduler.add(id, priority: Self.normal, host: "a") }
        #expect(scheduler.nextToStart() == [4, 3])
        scheduler.isSuspended = true
        #expect(scheduler.removeAll() == [4, 3, 2, 1, 0])
        #expect(scheduler.count == 0)
        #expect(scheduler.runningCount == 0)
        #expect(scheduler.orderedIDs() == [])
        #expect(scheduler.maxConcurrent == 2)
        #expect(scheduler.maxPerHost == 5)
        #expect(scheduler.lifo)
        #expect(scheduler.isSuspended)
        scheduler.isSuspended = false
        scheduler.add(4, priority: Self.normal, host: "a")
        scheduler.add(9, priority: Self.normal, host: "a")
        #expect(scheduler.nextToStart() == [9, 4])
    }

    @Test func orderedIDsListRunningInStartOrderThenPendingInStartOrder() {
        var scheduler = scheduler(limit: 3)
        scheduler.add(0, priority: Self.low, host: "a")
        #expect(scheduler.nextToStart() == [0])
        scheduler.add(1, priority: Self.normal, host: "a")
        scheduler.add(2, priority: Self.high, host: "a")
        #expect(scheduler.nextToStart() == [2, 1])
        for (id, priority) in [(3, Self.low), (4, Self.normal), (5, Self.high), (6, Self.normal)] {
            scheduler.add(id, priority: priority, host: "a")
        }
        let ordered = scheduler.orderedIDs()
        #expect(ordered == [0, 2, 1, 5, 4, 6, 3])
        scheduler.remove(2)
        scheduler.remove(0)
        let started = scheduler.nextToStart()
        #expect(started == [5, 4])
        #expect(scheduler.orderedIDs() == [1, 5, 4, 6, 3])
    }

    // MARK: Cost

    /// Not timed (speed is measured by the benchmarks): with a linear scan per operation
    /// this would be billions of steps and never finish.
    @Test(.timeLimit(.minutes(1)))
    func aHundredThousandAddsThenRemovalsComplete() async throws {
        let count = 100_000
        // Seconds of work, more under a sanitizer: on a thread of its own, not on one of the
        // concurrency pool's two, which every other test of the parallel suite needs.
        let run = try await offThePool { [self] in
            let hosts = 5
            var scheduler = scheduler(limit: 8, perHost: 3)
            for id in 0..<count {
                scheduler.add(id, priority: id % 3, host: "h\(id % hosts)")
            }
            let added = scheduler.count
            var started = Set<Int>()
            var perHost = [Int](repeating: 0, count: hosts)
            var problems: [String] = []
            func didStart(_ ids: [Int]) {
                for id in ids {
                    if !started.insert(id).inserted { problems.append("\(id) started twice") }
                    perHost[id % hosts] += 1
                }
                if scheduler.runningCount > 8 { problems.append("\(scheduler.runningCount) running") }
                if perHost.contains(where: { $0 > 3 }) { problems.append("per-host limit exceeded: \(perHost)") }
            }
            var running = scheduler.nextToStart()
            didStart(running)
            let peak = running.count
            // Every seventh item that has not started is removed while pending.
            var removed = Set<Int>()
            for id in stride(from: 3, to: count, by: 7) where !started.contains(id) {
                if scheduler.remove(id) { problems.append("pending \(id) held a slot") }
                removed.insert(id)
            }
            // Running items finish one at a time, oldest first; each frees a slot for the next.
            while !running.isEmpty {
                let id = running.removeFirst()
                if !scheduler.remove(id) { problems.append("running \(id) held no slot") }
                perHost[id % hosts] -= 1
                let next = scheduler.nextToStart()
                didStart(next)
                running += next
            }
            return (added: added, problems: problems, peak: peak, left: scheduler.count, started: started, removed: removed)
        }
        #expect(run.added == count)
        #expect(run.problems.isEmpty, "\(run.problems.prefix(5))")
        #expect(run.peak == 8)
        #expect(run.left == 0)
        #expect(run.started.isDisjoint(with: run.removed))
        #expect(run.started.count + run.removed.count == count)
    }
}

/// The queue's operations by request value, driven by hand. Distinct requests almost never
/// share a hash value, so collisions are forced here by filing under made-up ones.
@Suite struct QueueDuplicateIndexTests {
    func operation(_ path: String, header: String? = nil) -> RequestOperation {
        var request = Request(url: URL(string: "http://127.0.0.1:1\(path)")!)
        if let header { request.addHeader("X-Variant", header) }
        return RequestOperation(request: request)
    }

    @Test func requestsFiledUnderOneHashAreToldApartByValue() {
        var index = RequestQueue.DuplicateIndex()
        let a = operation("/a")
        let b = operation("/b")
        let variant = operation("/a", header: "v")
        let a2 = operation("/a")
        let a3 = operation("/a")
        #expect(index.insert(a, hash: 7, findingEqual: true).isEmpty)
        #expect(index.insert(b, hash: 7, findingEqual: true).isEmpty)
        #expect(index.insert(variant, hash: 7, findingEqual: true).isEmpty)
        #expect(index.insert(a2, hash: 7, findingEqual: true).map(ObjectIdentifier.init) == [ObjectIdentifier(a)])
        #expect(index.insert(a3, hash: 7, findingEqual: false).isEmpty)  // not looked for
        #expect(index.operations(equalTo: a.request, hash: 7).map(ObjectIdentifier.init) == [a, a2, a3].map(ObjectIdentifier.init))
        #expect(index.operations(equalTo: variant.request, hash: 7).map(ObjectIdentifier.init) == [ObjectIdentifier(variant)])
        #expect(index.operations(equalTo: a.request, hash: 8).isEmpty)  // another hash: nothing filed

        index.remove(a2, hash: 7)
        index.remove(a, hash: 7)
        #expect(index.operations(equalTo: a.request, hash: 7).map(ObjectIdentifier.init) == [ObjectIdentifier(a3)])
        for operation in [b, variant, a3] { index.remove(operation, hash: 7) }
        #expect(index.operations(equalTo: a.request, hash: 7).isEmpty)
        #expect(index.operations(equalTo: b.request, hash: 7).isEmpty)
    }

    /// Thousands of equal requests (a queue that allows duplicates), removed from anywhere and
    /// in any order, with more added in between: the index keeps the ones left in the order
    /// they were added, which is the order duplicate cancellation cancels them in.
    @Test func manyEqualRequestsRemovedOutOfOrderStayInTheOrderTheyWereAdded() {
        var index = RequestQueue.DuplicateIndex()
        let hash = 42
        var added: [RequestOperation] = []
        var left: [ObjectIdentifier] = []
        func add(_ count: Int) {
            for _ in 0..<count {
                let operation = operation("/same")
                #expect(index.insert(operation, hash: hash, findingEqual: false).isEmpty)
                added.append(operation)
                left.append(ObjectIdentifier(operation))
            }
        }
        func remove(_ operation: RequestOperation) {
            index.remove(operation, hash: hash)
            left.removeAll { $0 == ObjectIdentifier(operation) }
        }
        let other = operation("/other")  // another request under the same hash value
        _ = index.insert(other, hash: hash, findingEqual: true)
        add(2_000)
        // Finish out of order: a fixed permutation of the first 1,000 (7 is prime to 1,000),
        // from the middle, the ends and everywhere between.
        for step in 0..<1_000 {
            remove(added[(step * 7 + 500) % 1_000])
            if step % 250 == 0 {
                #expect(index.operations(equalTo: added[0].request, hash: hash).map(ObjectIdentifier.init) == left)
            }
        }
        add(500)  // newer ones go after every one left
        for i in stride(from: 2_499, through: 1_000, by: -3) { remove(added[i]) }  // newest first
        #expect(index.operations(equalTo: added[0].request, hash: hash).map(ObjectIdentifier.init) == left)
        // A newer equal request finds every earlier one, in the order they were added.
        let newest = operation("/same")
        #expect(index.insert(newest, hash: hash, findingEqual: true).map(ObjectIdentifier.init) == left)
        #expect(index.operations(equalTo: other.request, hash: hash).map(ObjectIdentifier.init) == [ObjectIdentifier(other)])
        for operation in added { index.remove(operation, hash: hash) }
        index.remove(other, hash: hash)
        #expect(index.operations(equalTo: newest.request, hash: hash).map(ObjectIdentifier.init) == [ObjectIdentifier(newest)])
    }

    @Test func removingTheLastButOneOperationOfAHashKeepsTheOther() {
        var index = RequestQueue.DuplicateIndex()
        let a = operation("/a")
        let a2 = operation("/a")
        _ = index.insert(a, hash: 1, findingEqual: true)
        _ = index.insert(a2, hash: 1, findingEqual: true)
        index.remove(a, hash: 1)
        index.remove(a, hash: 1)  // not filed any more: nothing happens
        #expect(index.operations(equalTo: a.request, hash: 1).map(ObjectIdentifier.init) == [ObjectIdentifier(a2)])
        #expect(index.insert(a, hash: 1, findingEqual: true).map(ObjectIdentifier.init) == [ObjectIdentifier(a2)])
        index.remove(a2, hash: 1)
        index.remove(a, hash: 1)
        #expect(index.operations(equalTo: a.request, hash: 1).isEmpty)
    }
}
