import CCurl
import Foundation
#if canImport(Glibc)
import Glibc
#endif

// A streamed request body (Request.Body.stream): libcurl's read callback takes what the
// producer buffered in the body's UploadChannel, or pauses the transfer (CURL_READFUNC_PAUSE)
// until the producer delivers, which unpauses it through the engine's inbox. Engine thread.

let transferStreamReadCallback: ccurl_data_callback = { buffer, size, count, userdata in
    let attempt = Unmanaged<Attempt>.fromOpaque(userdata!).takeUnretainedValue()
    return attempt.readStreamedBody(into: UnsafeMutableRawBufferPointer(start: buffer, count: size * count))
}

let transferStreamSeekCallback: ccurl_seek_callback = { userdata, offset, origin in
    let attempt = Unmanaged<Attempt>.fromOpaque(userdata!).takeUnretainedValue()
    return attempt.rewindStreamedBody(to: origin == SEEK_SET ? Int64(offset) : -1)
}

extension Attempt {
    /// Attaches the streamed body to this attempt's operation (the first attempt starts the
    /// producer and has the body closed when the operation ends) and sets the read and seek
    /// callbacks. Throws when the body cannot be sent by this attempt: given to another
    /// operation, or partly sent by an earlier attempt or run.
    func configureStreamedBody(_ easy: UnsafeMutableRawPointer, _ channel: UploadChannel) throws(RequestError) {
        guard let delegate else { throw .cancelled }
        let operation = delegate as? RequestOperation
        try channel.attach(ObjectIdentifier(delegate)) { close in operation?.onFinish { _ in close() } }
        let this = Unmanaged.passUnretained(self).toOpaque()
        _ = ccurl_easy_setopt_data_callback(easy, CURLOPT_READFUNCTION, transferStreamReadCallback)
        _ = ccurl_easy_setopt_pointer(easy, CURLOPT_READDATA, this)
        _ = ccurl_easy_setopt_seek_callback(easy, transferStreamSeekCallback)
        _ = ccurl_easy_setopt_pointer(easy, CURLOPT_SEEKDATA, this)
    }

    /// libcurl's read callback for a streamed body.
    func readStreamedBody(into target: UnsafeMutableRawBufferPointer) -> Int {
        guard let channel = upload?.stream else { return Int(CURL_READFUNC_ABORT) }
        switch channel.read(into: target, resume: { { [engine, self] in engine.resume(self) } }) {
        case .bytes(let count, let last):
            lastActivityNanos = engine.turnNanos
            if last { requestBodySent() }
            return count
        case .end:
            requestBodySent()
            return 0
        case .pause:
            isPaused = true  // the producer is behind: no stall limit until the engine unpauses
            return Int(CURL_READFUNC_PAUSE)
        case .fail(let error):
            callbackFailure = error
            return Int(CURL_READFUNC_ABORT)
        }
    }

    /// libcurl's seek callback for a streamed body: a rewind to its start before any byte was
    /// taken; otherwise the transfer fails with the reason (not libcurl's "rewind failed").
    func rewindStreamedBody(to offset: Int64) -> Int32 {
        guard let channel = upload?.stream else { return CURL_SEEKFUNC_CANTSEEK }
        if let refusal = channel.rewind(to: offset) {
            callbackFailure = refusal
            return CURL_SEEKFUNC_FAIL
        }
        return CURL_SEEKFUNC_OK
    }
}
