import CCurl

/// A libcurl easy handle with its error buffer, pooled by the engine and reused across
/// transfers (`curl_easy_reset` keeps its connection-independent caches). Engine thread only.
final class EasyHandle {
    let easy: UnsafeMutableRawPointer
    let errorBuffer: UnsafeMutablePointer<CChar>

    init() {
        guard let easy = curl_easy_init() else { fatalError("curl_easy_init failed: out of memory") }
        self.easy = easy
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
    }

    func reset() {
        curl_easy_reset(easy)
        errorBuffer[0] = 0
    }

    deinit {
        curl_easy_cleanup(easy)
        errorBuffer.deallocate()
    }
}
