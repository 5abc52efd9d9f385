import CCurl
import Foundation
import HTTPTypes
import Synchronization

/// Who hears about a transfer. Called on the engine thread: implementations do their
/// bookkeeping and hand anything that is user code to another queue.
protocol TransferDelegate: AnyObject, Sendable {
    /// Throttled progress; bytes include what a resumed download already had.
    func transfer(_ transfer: Transfer, didProgressDownload download: TransferProgress, upload: TransferProgress)
    /// The attempt is over, successfully or not, and the engine has let go of it.
    func transfer(_ transfer: Transfer, didFinishWith outcome: AttemptOutcome)
}

/// One attempt of one operation: the request, where its body goes, and what came back.
///
/// A transfer is made on any thread and handed to the engine; from then on only the engine
/// thread touches its mutable state (libcurl calls its callbacks from `curl_multi_perform`
/// on that thread). The one exception is `cancelRequested`, an atomic.
final class Transfer: @unchecked Sendable {  // safe: mutable state is confined to the engine thread (see above)
    /// The request of this hop: the operation's, or the one a redirect the transfer follows
    /// itself led to (see `Transfer+Redirects.swift`). Engine thread only once started.
    @exclusivity(unchecked) var request: Request
    let attempt: Int
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
    // being modified reaches back to it, so the checks (eleven per response's header lines
    // alone, about 125 instructions each) could never fire. ThreadSanitizer still watches
    // the confinement.
    @exclusivity(unchecked) private(set) var delegate: (any TransferDelegate)?
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
    /// reused one (see ``Transfer/metLeftoverBytes(code:easy:)``).
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
    @exclusivity(unchecked) var progressBase: Int64 = 0

    enum BodySink {
        case undecided
        case memory
        case file
        case discard
        /// To ``bodyStream``, whose head was handed over.
        case stream
    }

    init(request: Request, attempt: Int, wantsProgress: Bool, delegate: any TransferDelegate,
         engine: CurlEngine = .shared, bodyStream: BodyStream? = nil, statusesNotStreamed: Set<Int> = []) {
        self.request = request
        self.attempt = attempt
        self.wantsProgress = wantsProgress
        self.delegate = delegate
        self.engine = engine
        self.bodyStream = bodyStream
        self.statusesNotStreamed = statusesNotStreamed
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
        delegate?.transfer(self, didFinishWith: outcome)
    }

    func reportProgress(download: TransferProgress, upload: TransferProgress) {
        delegate?.transfer(self, didProgressDownload: download, upload: upload)
    }
}
