import CCurl
import HTTPTypes

/// A libcurl easy handle with its error buffer, pooled by the engine and reused across
/// transfers, so its connection-independent caches survive. Engine thread only.
///
/// A handle whose transfer ended well keeps its options: when the next transfer would set the
/// same ones (``configuration``, compared in place by `Attempt.configure`), it only gets a new
/// URL and new callback data, as a C program re-adds its handles. Any other transfer starts from
/// a handle that `curl_easy_reset` put back to libcurl's defaults.
final class EasyHandle {
    let easy: UnsafeMutableRawPointer
    let errorBuffer: UnsafeMutablePointer<CChar>
    /// The options the handle holds, when they can be reused as they are; nil after a reset,
    /// and after a transfer whose options were its own (a body, header fields, a Range).
    /// Boxed: each transfer reads them, and reading a struct of strings out of a class's
    /// optional property copied it (retaining every string) where a box is one retain.
    @exclusivity(unchecked) var configuration: SharedValue<ReusableOptions>?
    /// False once options were set since the last reset.
    @exclusivity(unchecked) private var isReset = true

    init() {
        guard let easy = curl_easy_init() else { fatalError("curl_easy_init failed: out of memory") }
        self.easy = easy
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
    }

    /// Before a transfer that sets every option: back to libcurl's defaults if needed.
    func prepareForNewConfiguration() {
        if !isReset { curl_easy_reset(easy) }
        isReset = false
        configuration = nil
    }

    /// After a transfer: keeps the options for a transfer like it only when this one ended
    /// well (`keepingOptions`); otherwise back to libcurl's defaults.
    func recycle(keepingOptions: Bool) {
        errorBuffer[0] = 0
        guard !keepingOptions || configuration == nil else { return }
        if !isReset { curl_easy_reset(easy) }
        isReset = true
        configuration = nil
    }

    deinit {
        curl_easy_cleanup(easy)
        errorBuffer.deallocate()
    }
}

/// What decides the options of a transfer that has nothing of its own to set: see
/// `Attempt.reusableOptions`.
struct ReusableOptions: Equatable {
    var method: HTTPRequest.Method
    var https: Bool
    var protocols: String
    var redirectPolicy: Request.RedirectPolicy
    var timeouts: Request.Timeouts
    var maxResponseBodySize: Int64?
    /// CURLOPT_MAXFILESIZE_LARGE (see `Attempt.announcedBodyLimit`).
    var announcedBodyLimit: Int64?
    var tls: Request.TLSOptions
    var wantsProgress: Bool
    var receiveBufferSize: Int
}
