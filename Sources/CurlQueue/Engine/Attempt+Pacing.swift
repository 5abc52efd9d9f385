import CCurl

// Receive-speed limits (Request.maxReceiveSpeed, Request.sharedReceiveLimit), paced by the
// write callback: bytes that come ahead of the rate are refused (CURL_WRITEFUNC_PAUSE, libcurl
// keeps them) and the engine unpauses the transfer when their time has come, as it does for a
// streamed body whose consumer was behind.
//
// libcurl's own CURLOPT_MAX_RECV_SPEED_LARGE is not used: libcurl 7.88 reads up to 100 buffers
// in one go while the socket has data, so on a fast link it let 1.5 MiB through in 30 ms with a
// limit of 512 KiB/s, and it cannot share one limit among transfers.

extension Attempt {
    /// Whether a receive-speed limit applies.
    var isPaced: Bool { request.maxReceiveSpeed != nil || request.sharedReceiveLimit != nil }

    /// Whether `count` body bytes may be taken now; if not, the transfer is paused until they
    /// may (the engine unpauses it, and libcurl offers the same bytes again). Engine thread.
    func mayReceive(_ count: Int) -> Bool {
        let now = CurlEngine.monotonicNanos()
        if request.maxReceiveSpeed != nil, ownPaceReady > now {
            pause(until: ownPaceReady)
            return false
        }
        if let shared = request.sharedReceiveLimit, let wait = shared.take(count, now: now) {
            pause(until: wait)
            return false
        }
        if let rate = request.maxReceiveSpeed {
            ownPaceReady = PaceClock.advance(ownPaceReady, by: count, rate: rate, now: now)
        }
        return true
    }

    private func pause(until time: UInt64) {
        isPaused = true  // no stall limit while the limit holds it back
        pacedUntil = Swift.max(1, time)
        engine.startPacing(self)
    }
}

/// The arithmetic of pacing: a transfer (or a group) may take bytes when its clock is not
/// ahead of now; taking `count` bytes moves the clock `count / rate` on. A clock left behind
/// now (the transfer was idle, or woken late) gives at most `credit` of it back, so the
/// engine's wake-up latency is not lost and an idle spell does not bank a burst. The first
/// bytes (a clock still at 0) start it at now, with no credit: a download starts at the rate.
enum PaceClock {
    static let credit: UInt64 = 100_000_000

    static func advance(_ ready: UInt64, by count: Int, rate: Int64, now: UInt64) -> UInt64 {
        let start = ready == 0 ? now : Swift.max(ready, now > credit ? now - credit : 0)
        let nanos = Double(count) * 1e9 / Double(Swift.max(1, rate))
        return start + UInt64(Swift.min(nanos, 1e15))
    }
}

extension CurlEngine {
    /// Notes a transfer paused for its speed limit; the engine's loop unpauses it at its time.
    func startPacing(_ attempt: Attempt) {
        if !pacedAttempts.contains(where: { $0 === attempt }) { pacedAttempts.append(attempt) }
    }

    /// Forgets a transfer that ends while paused for its speed limit.
    func stopPacing(_ attempt: Attempt) {
        attempt.pacedUntil = 0
        pacedAttempts.removeAll { $0 === attempt }
    }

    /// Unpauses the paced transfers whose time has come. Unpausing may call the write
    /// callback at once, which may pause the transfer again (and note it again).
    func unpauseDueTransfers() {
        let now = Self.monotonicNanos()
        var due: [Attempt] = []
        pacedAttempts.removeAll { attempt in
            guard attempt.pacedUntil <= now else { return false }
            due.append(attempt)
            return true
        }
        for attempt in due {
            attempt.pacedUntil = 0
            guard let easy = attempt.easy else { continue }
            attempt.isPaused = false
            attempt.lastActivityNanos = now
            if attempt.hasStallLimits { lowerNextDeadline(to: attempt.deadline) }
            _ = ccurl_easy_unpause(easy)
        }
    }

    /// Milliseconds until the first paced transfer may go on (rounded up), for the poll.
    func millisecondsToNextUnpause() -> Int32 {
        let next = pacedAttempts.map(\.pacedUntil).min() ?? .max
        let now = Self.monotonicNanos()
        return next > now ? Int32(clamping: (next - now + 999_999) / 1_000_000) : 0
    }
}
