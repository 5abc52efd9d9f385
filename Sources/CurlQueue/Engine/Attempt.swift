import CCurl
import Foundation
import HTTPTypes
import Synchronization

/// Who hears about a transfer. Called on the engine thread: implementations do their
/// bookkeeping and hand anything that is user code to another queue.
protocol AttemptDelegate: AnyObject, Sendable {
    /// Throttled progress; bytes include what a resumed download already had. `download` is
    /// nil before the head of the response whose body it counts (an upload's progress then).
    func attempt(_ attempt: Attempt, didProgressDownload download: TransferProgress?, upload: TransferProgress)
    /// The attempt is over, successfully or not, and the engine has let go of it.
    func attempt(_ attempt: Attempt, didFinishWith outcome: AttemptOutcome)
}

/// One attempt of one operation: the request, where its body goes, and what came back.
///
/// A transfer is made on any thread and handed to the engine; from then on only the engine
/// thread touches its mutable state (libcurl calls its callbacks from `curl_multi_perform`
/// on that thread). The one exception is `cancelRequested`, an atomic.
final class Attempt: @unchecked Sendable {  // safe: mutable state is confined to the engine thread (see above)
    /// The request of this hop: the operation's, or the one a redirect the transfer follows
    /// itself led to (see `Attempt+Redirects.swift`). Engine thread only once started.
    @exclusivity(unchecked) var request: Request
    /// 1 for the first attempt of its operation, 2 for the first retry, and so on.
    let number: Int
    let wantsProgress: Bool
    /// Where the body goes when the operation streams it (see ``BodyStream``). Engine thread
    /// only; let go of when the attempt ends: a push stream holds the caller's handlers, which
    /// must not be freed here, on the engine thread, after the callback queue let go of them.
    @exclusivity(unchecked) private(set) var bodyStream: BodyStream?
    /// Statuses whose body is not streamed but kept in memory, as a retry may follow them:
    /// the head of a response that is retried must not reach the consumer.
    let statusesNotStreamed: Set<Int>
    let engine: CurlEngine
    /// Set from any thread by `CurlEngine.cancel`; a transfer that sees it before it starts never starts.
    let cancelRequested = Atomic<Bool>(false)

    // Engine thread only, from here on. Without dynamic exclusivity checks
    // (`@exclusivity(unchecked)`): one thread touches them and nothing it calls while one is
    // being modified reaches back to it, so the checks (docs/performance.md) could never
    // fire. ThreadSanitizer still watches
    // the confinement.
    @exclusivity(unchecked) private(set) var delegate: (any AttemptDelegate)?
    @exclusivity(unchecked) var easy: UnsafeMutableRawPointer?
    @exclusivity(unchecked) var handle: EasyHandle?
    /// The URL as handed to libcurl: the effective URL is the request's own when it matches.
    @exclusivity(unchecked) var urlString = ""
    @exclusivity(unchecked) var headerList: UnsafeMutablePointer<curl_slist>?
    @exclusivity(unchecked) var head = ResponseHeadParser()
    @exclusivity(unchecked) var memoryBody = Data()
    @exclusivity(unchecked) var file: DestinationFile?
    /// Where the body goes, decided at its first byte.
    @exclusivity(unchecked) var bodySink = BodySink.undecided
    /// Set when the server refused our Range or answered another one: the attempt runs
    /// again (once) from byte 0, without a Range.
    @exclusivity(unchecked) var rangeRefused = false
    /// The `Content-Range` of the 206 whose body goes to the `.part` file.
    @exclusivity(unchecked) var partialRange: ContentRange?
    /// Requests this transfer put on a connection (see ``requestWillBeSent()``), and whether
    /// any line of an answer came since the last one.
    @exclusivity(unchecked) var requestsSent = 0
    @exclusivity(unchecked) var answered = false
    /// The transfer stopped at a 303 it must not follow (see `didReceiveHeaderLine`): that head
    /// is the response.
    @exclusivity(unchecked) var stoppedAtSeeOther = false
    /// The engine runs the attempt again when it completes.
    @exclusivity(unchecked) var restartPending = false
    /// The attempt runs (again) on a new connection: its first run read bytes left on a
    /// reused one (see ``Attempt/metLeftoverBytes(code:easy:)``).
    @exclusivity(unchecked) var freshConnection = false
    /// The prerequest callback found bytes waiting on the reused HTTP/1 connection the next
    /// request was to go out on, and stopped it unsent (see ``requestWillBeSent(peerAddress:localPort:peerPort:)``).
    @exclusivity(unchecked) var metStrayBytesBeforeRequest = false
    /// Whether this transfer follows redirects itself instead of libcurl (decided at its first
    /// configuration), the redirects it followed so, and whether one of them left the
    /// request's origin. Kept across restarts.
    @exclusivity(unchecked) var followsRedirectsItself: Bool?
    @exclusivity(unchecked) var redirectsFollowed = 0
    @exclusivity(unchecked) var leftOrigin = false
    @exclusivity(unchecked) var upload: UploadSource?
    /// A failure found by a callback (a disk error, a bad Content-Range); it wins over the
    /// CURLcode that aborting the transfer produces.
    @exclusivity(unchecked) var callbackFailure: RequestError?
    /// Body bytes of this response so far, the resumed part of a file included.
    @exclusivity(unchecked) var bodyBytes: Int64 = 0
    @exclusivity(unchecked) var lastProgressNanos: UInt64 = 0
    /// The latest progress the throttle held back, reported by the engine once the interval
    /// has passed unless a later report came first (``CurlEngine/flushHeldProgress(now:)``):
    /// without it, bytes that arrive just after a report and then stop (a stall, a slow
    /// server) would not be reported until libcurl calls the progress callback again, if ever.
    @exclusivity(unchecked) var heldProgress: (download: TransferProgress?, upload: TransferProgress)?
    /// Whether this transfer is in the engine's list of held progress to flush.
    @exclusivity(unchecked) var isInProgressFlushList = false
    @exclusivity(unchecked) var progressBase: Int64 = 0
    /// Whether the head of the response whose body this is (not an interim 1xx, not a redirect
    /// libcurl follows) is complete: no download progress is reported before it.
    @exclusivity(unchecked) var finalHeadReceived = false

    // The stall limits the engine enforces (see ``CurlEngine`` and ``deadline``), in
    // nanoseconds of the monotonic clock; 0 for none.
    /// `Timeouts.idle` and `Timeouts.head`, from the request.
    let idleLimitNanos: UInt64
    let headLimitNanos: UInt64
    /// When a byte last moved, either way (the engine's time of the turn it moved in); 0 until
    /// the first request of the attempt goes out on a connection: the connect limit covers
    /// the time before.
    @exclusivity(unchecked) var lastActivityNanos: UInt64 = 0
    /// When the request was wholly sent, while its response head is awaited; else 0.
    @exclusivity(unchecked) var headClockStart: UInt64 = 0
    /// The write callback paused the transfer (a stream's consumer is behind): the server is
    /// not the one stalling, so no stall limit runs until the engine unpauses it.
    @exclusivity(unchecked) var isPaused = false
    /// Paused for a receive-speed limit until this time (monotonic nanoseconds), or 0.
    @exclusivity(unchecked) var pacedUntil: UInt64 = 0
    /// When ``Request/maxReceiveSpeed`` next lets bytes in (see Attempt+Pacing.swift).
    @exclusivity(unchecked) var ownPaceReady: UInt64 = 0
    /// This transfer's place in the engine's list of transfers with stall limits, or -1.
    @exclusivity(unchecked) var deadlineIndex = -1

    enum BodySink {
        case undecided
        case memory
        case file
        case discard
        /// To ``bodyStream``, whose head was handed over.
        case stream
    }

    init(request: Request, number: Int, wantsProgress: Bool, delegate: any AttemptDelegate,
         engine: CurlEngine = .shared, bodyStream: BodyStream? = nil, statusesNotStreamed: Set<Int> = []) {
        self.request = request
        self.number = number
        self.wantsProgress = wantsProgress
        self.delegate = delegate
        self.engine = engine
        self.bodyStream = bodyStream
        self.statusesNotStreamed = statusesNotStreamed
        idleLimitNanos = request.timeouts.idle.map(Self.limitNanos) ?? 0
        headLimitNanos = request.timeouts.head.map(Self.limitNanos) ?? 0
    }

    /// A limit in nanoseconds, at least one millisecond (0 means none).
    private static func limitNanos(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else { return 1_000_000 }
        let nanos = UInt64(clamping: seconds).multipliedReportingOverflow(by: 1_000_000_000)
        if nanos.overflow { return UInt64.max / 4 }
        return Swift.min(UInt64.max / 4, Swift.max(1_000_000, nanos.partialValue + UInt64(clamping: attoseconds / 1_000_000_000)))
    }

    /// Whether the engine has a stall limit to watch for this transfer.
    var hasStallLimits: Bool { idleLimitNanos > 0 || headLimitNanos > 0 }

    /// When a stall limit ends this transfer, as things stand (`UInt64.max` for never): a byte
    /// moving, or the head arriving, only moves it later. Engine thread.
    var deadline: UInt64 {
        if isPaused { return .max }
        var deadline = UInt64.max
        if idleLimitNanos > 0, lastActivityNanos > 0 { deadline = lastActivityNanos + idleLimitNanos }
        if headLimitNanos > 0, headClockStart > 0 { deadline = Swift.min(deadline, headClockStart + headLimitNanos) }
        return deadline
    }

    /// The failure of a transfer whose ``deadline`` passed at `now`.
    func stallFailure(now: UInt64) -> RequestError {
        func seconds(_ nanos: UInt64) -> String { String(format: "%.1f s", Double(nanos) / 1e9) }
        if idleLimitNanos > 0, lastActivityNanos > 0, lastActivityNanos + idleLimitNanos <= now {
            return .timedOut(TransportFailure(
                code: .operationTimedOut,
                message: "no byte moved for \(seconds(now - lastActivityNanos)) (idle limit \(seconds(idleLimitNanos)))"))
        }
        return .timedOut(TransportFailure(
            code: .operationTimedOut,
            message: "the response head was not complete \(seconds(now - headClockStart)) after the request was sent (head limit \(seconds(headLimitNanos)))"))
    }

    /// Starts the stall clocks when a request goes out on a connection: the idle one, and the
    /// head one unless a body is still to be sent.
    func requestGoesOut() {
        let now = engine.turnNanos
        lastActivityNanos = now
        finalHeadReceived = false
        headClockStart = (upload?.count ?? 0) == 0 ? now : 0
        if hasStallLimits { engine.lowerNextDeadline(to: deadline) }
    }

    /// The last byte of the request body was handed to libcurl: the head is awaited from now.
    func requestBodySent() {
        guard headClockStart == 0, headLimitNanos > 0, lastActivityNanos > 0 else { return }
        headClockStart = engine.turnNanos
        engine.lowerNextDeadline(to: deadline)
    }

    /// Clears what the first run of the attempt received, before the engine runs it again
    /// without a Range.
    func prepareRestart() {
        head = ResponseHeadParser()
        memoryBody = Data()
        bodySink = .undecided
        callbackFailure = nil
        restartPending = false
        bodyBytes = 0
        progressBase = 0
        heldProgress = nil
        finalHeadReceived = false
        lastActivityNanos = 0
        headClockStart = 0
        isPaused = false
        partialRange = nil
        requestsSent = 0
        answered = false
        stoppedAtSeeOther = false
        metStrayBytesBeforeRequest = false
        file = nil
    }

    /// Reports the end of the attempt and drops the delegate (it usually owns this transfer)
    /// and the body stream (the operation has it too).
    func finish(_ outcome: AttemptOutcome) {
        let delegate = self.delegate
        self.delegate = nil
        bodyStream = nil
        delegate?.attempt(self, didFinishWith: outcome)
    }

    func reportProgress(download: TransferProgress?, upload: TransferProgress) {
        delegate?.attempt(self, didProgressDownload: download, upload: upload)
    }
}
