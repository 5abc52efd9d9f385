import CurlQueue
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// `Timeouts.idle` ends a transfer once no byte has moved for that long, wherever it stalls,
/// and `Timeouts.head` ends a server that trickles its head. Each bound is asserted from both
/// sides: no earlier than the limit after the last byte (bytes that move start the clock
/// again), and not much later (libcurl's low-speed check, which these replaced, failed 6 to
/// 7 s after the last byte with a limit of 1 s).
@Suite struct StallLimitTests {
    /// Slack above the bound for a loaded machine and ThreadSanitizer (the engine's own
    /// timer aims at about 10 ms; 2.6 s were seen with TSan beside four builds on 2 cores). It
    /// stays below what libcurl's low-speed check gave with a 1 s limit: 6 to 7 s.
    static let slack = Duration.seconds(3)

    /// Runs `request` and returns its outcome, how long it took, and when it ended. The end is
    /// read in the completion handler (on its callback queue), not after the `await`: under
    /// load, the concurrency pool may take seconds to resume the test, and that is not the
    /// limit's doing.
    private func timed(_ request: Request, operation: RequestOperation? = nil) async -> (Result<Response, RequestError>, Duration, ContinuousClock.Instant) {
        let operation = operation ?? RequestOperation(request: request)
        let start = ContinuousClock.now
        let (result, end) = await withCheckedContinuation { continuation in
            operation.completionHandler = { continuation.resume(returning: ($0, ContinuousClock.now)) }
            try! operation.start()
        }
        return (result, end - start, end)
    }

    /// The failure's lower bound is the test's own clock (`elapsed`, from `start()` to the
    /// handler, can only be longer than the limit's span); its upper bound is the engine's
    /// measure, which the message gives (the time since the last byte, or since the request
    /// went out). Under load the test's clock also counts the connection's set-up and the
    /// callback queue's delay, neither of which is the limit's doing.
    private func expectTimedOut(_ result: Result<Response, RequestError>, _ elapsed: Duration,
                                within range: ClosedRange<Duration>, saying words: String, _ label: String) {
        print("\(label): failed after \(elapsed)")
        guard case .failure(.timedOut(let failure)) = result else {
            Issue.record("\(label): expected timedOut, got \(result)")
            return
        }
        #expect(failure.code == .operationTimedOut)
        #expect(failure.message.contains(words), "\(failure.message)")
        #expect(elapsed >= range.lowerBound, "\(label): failed after \(elapsed), before \(range.lowerBound)")
        guard let measured = Self.engineMeasure(failure.message) else {
            Issue.record("\(label): no time in the message: \(failure.message)")
            return
        }
        #expect(measured <= range.upperBound, "\(label): the engine ended it \(measured) after its clock started, past \(range.upperBound)")
    }

    /// The first time in a stall failure's message ("no byte moved for 2.0 s (idle limit …)",
    /// "the response head was not complete 2.5 s after …"): the engine's own measure.
    static func engineMeasure(_ message: String) -> Duration? {
        guard let match = message.firstMatch(of: /(\d+\.\d) s/), let seconds = Double(match.1) else { return nil }
        return .milliseconds(Int(seconds * 1000))
    }

    private func request(_ server: FixtureServer, _ path: String, idle: Duration?) -> Request {
        var request = Request(url: server.url(path))
        request.timeouts.idle = idle
        // A backstop: should the idle limit not work, the test fails at it instead of hanging.
        if idle != nil { request.timeouts.total = .seconds(15) }
        return request
    }

    @Test func aStallBeforeTheHeadFailsAtTheIdleLimit() async throws {
        try await withServer { server in
            // The server reads the request and never answers.
            let (result, elapsed, _) = await timed(request(server, "/gate/never-\(UUID().uuidString)", idle: .seconds(1)))
            expectTimedOut(result, elapsed, within: .milliseconds(950)...(.seconds(1) + Self.slack),
                           saying: "no byte moved", "stall before the head")
        }
    }

    @Test func aStallInTheMiddleOfTheHeadFailsAtTheIdleLimitAfterItsLastByte() async throws {
        try await withServer { server in
            // Three lines of the head at 0, 0.4 and 0.8 s, then nothing: the last byte at 0.8 s.
            // (libcurl hands the head over a line at a time: a line's bytes count once it is
            // whole.) A limit of 2 s: the server's timers may lag on a loaded machine.
            let (result, elapsed, end) = await timed(request(server, "/trickle-head?lines=1&interval=400&stallAfter=3", idle: .seconds(2)))
            expectTimedOut(result, elapsed, within: .milliseconds(2000)...(.milliseconds(2800) + Self.slack),
                           saying: "no byte moved", "stall mid-head")
            // Timed from the last line the client can have seen, as the server wrote them, not
            // from when they were due: a late server timer (the test process is busy) may leave
            // the third line unwritten until the limit, rightly, ended the transfer. A line
            // written 2 s or more after the one before may have come after that end (and before
            // the handler ran): the one before it is then the last the client saw. The clock
            // must have started again at least once: that line is not the first.
            let written = server.trickleWrites.filter { $0 < end }
            try #require(written.count >= 2, "a line after the first came before the end: \(written.count) of 3")
            let last = written[written.count - 1], previous = written[written.count - 2]
            let lastSeen = last - previous >= .milliseconds(1950) ? previous : last
            try #require(lastSeen > written[0], "the server wrote its second line 2 s or more after the first")
            print("stall mid-head: failed \(end - lastSeen) after the last line written (\(written.count) of 3 before the end)")
            #expect(end - lastSeen >= .milliseconds(1950), "failed \(end - lastSeen) after the last line the client can have seen")
        }
    }

    @Test(arguments: [
        // 5 bytes with the head, 5 more at 0.6 s, then nothing (10 body bytes).
        ("/bytes/100000?stallAfter=10&chunk=5&drip=600", Int64(10)),
        // 500,000 bytes with the head, 500,000 more at 0.6 s, then nothing (1 MB).
        ("/bytes/4000000?stallAfter=1000000&chunk=500000&drip=600", Int64(1_000_000)),
    ])
    func aStallInTheMiddleOfTheBodyFailsAtTheIdleLimitAfterItsLastByte(_ path: String, stallAfter: Int64) async throws {
        try await withServer { server in
            // A limit of 2 s leaves the server's second write, due at 0.6 s, 1.4 s to come on a
            // loaded machine before the limit rightly ends the transfer without it (the test
            // then says the bytes were not all reported).
            let request = request(server, path, idle: .seconds(2))
            let operation = RequestOperation(request: request)
            operation.callbackQueue = DispatchQueue(label: "stall mid-body")
            let reports = LockedBox([Int64]())
            operation.downloadProgressHandler = { progress in reports.update { $0.append(progress.bytesTransferred) } }
            let (result, elapsed, _) = await timed(request, operation: operation)
            guard reports.value.max() == stallAfter else {
                Issue.record("the body's \(stallAfter) bytes were not all reported: \(reports.value), \(result)")
                return
            }
            // Timed from the last byte, not from the start: the second write comes 0.6 s after
            // the first, so the failure comes no earlier than 2.6 s after the request (2.0 s
            // if the clock had not started again), and by the engine's measure at most the
            // limit and the slack after the last byte. (The report of the last byte is no
            // clock: it runs on a Dispatch queue, which the parallel suite can hold up.)
            print("stall mid-body \(path): failed \(elapsed) after the start")
            #expect(elapsed >= .milliseconds(2500), "failed \(elapsed) after the start: not timed from the last byte")
            guard case .failure(.timedOut(let failure)) = result else {
                Issue.record("expected timedOut, got \(result)")
                return
            }
            #expect(failure.code == .operationTimedOut)
            #expect(failure.message.contains("no byte moved"), "\(failure.message)")
            let measured = try #require(Self.engineMeasure(failure.message), "\(failure.message)")
            #expect(measured >= .seconds(2) && measured <= .seconds(2) + Self.slack, "\(failure.message)")
        }
    }

    @Test func aStallInTheMiddleOfAnUploadFailsAtTheIdleLimitAfterItsLastByte() async throws {
        try await withServer { server in
            // The server stops reading: the body stops once the socket buffers are full.
            var request = request(server, "/stall-upload", idle: .seconds(1))
            request.method = .post
            request.body = .bytes(Data(count: 64 * 1024 * 1024))
            let operation = RequestOperation(request: request)
            let reports = LockedBox([(ContinuousClock.Instant, Int64)]())
            operation.uploadProgressHandler = { progress in reports.update { $0.append((.now, progress.bytesTransferred)) } }
            let (result, elapsed, end) = await timed(request, operation: operation)
            guard let last = reports.value.last else {
                Issue.record("no upload progress: \(result)")
                return
            }
            // The socket buffers fill within a fraction of a second: the last byte moves a
            // little after the start, and the last progress report (at most every 50 ms, on
            // another queue) comes after it.
            print("stall mid-upload: \(last.1) bytes sent, failed \(end - last.0) after the last report")
            #expect(last.1 > 0 && last.1 < 64 * 1024 * 1024)
            #expect(end - last.0 <= .seconds(1) + Self.slack)
            expectTimedOut(result, elapsed, within: .milliseconds(1000)...(.milliseconds(1500) + Self.slack),
                           saying: "no byte moved", "stall mid-upload")
        }
    }

    @Test func bytesThatKeepMovingAreNotAStall() async throws {
        try await withServer { server in
            // A line of the head every 400 ms (4.4 s for the head): the idle limit of 2 s never
            // passes; the head limit of 2.5 s does.
            var request = request(server, "/trickle-head?lines=1&interval=400", idle: .seconds(2))
            request.timeouts.head = .milliseconds(2500)
            let (result, elapsed, _) = await timed(request)
            expectTimedOut(result, elapsed, within: .milliseconds(2450)...(.milliseconds(2500) + Self.slack),
                           saying: "response head was not complete", "trickled head")
        }
    }

    @Test func noLimitMeansNone() async throws {
        try await withServer { server in
            // A 1.5 s pause mid-body with no idle limit: it completes.
            let gate = "pause-\(UUID().uuidString)"
            var request = request(server, "/bytes/20000?holdAt=10000&gate=\(gate)", idle: nil)
            request.timeouts.head = nil
            let operation = RequestOperation(request: request)
            let outcome = Task { await completion(of: operation) }
            try await Task.sleep(for: .milliseconds(1500))  // the pause is the event under test
            server.openGate(gate)
            let response = try await outcome.value.get()
            #expect(response.body == Data(FixtureServer.expectedBytes(count: 20000)))
        }
    }

    @Test func theDefaultsEndAStalledOrTricklingServer() async throws {
        // The defaults a daemon gets without setting anything: 60 s idle, 60 s for the head.
        // (HTTPClientStallLimitTests: the same for HTTPClient's defaults.)
        #expect(Request.Timeouts().idle == .seconds(60))
        #expect(Request.Timeouts().head == .seconds(60))
        #expect(Request(string: "http://127.0.0.1/").timeouts == Request.Timeouts())
        try await withServer { server in
            // More slack: transfers for a minute beside the rest of the parallel suite.
            let bound = Duration.seconds(60)...(Duration.seconds(66))
            let (stallResult, stallElapsed, _) = await timed(Request(url: server.url("/bytes/100000?stallAfter=10")))
            expectTimedOut(stallResult, stallElapsed, within: bound, saying: "no byte moved", "default idle, operation")
        }
    }
}
