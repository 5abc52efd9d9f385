import CCurl
import Foundation
import HTTPTypes
#if canImport(Glibc)
import Glibc
#endif

// libcurl's callbacks, called on the engine thread from inside curl_multi_perform. Each gets
// the Attempt through its userdata pointer, unretained: the engine holds the transfer
// (through CURLOPT_PRIVATE) for as long as its easy handle is in the multi handle.

let transferHeaderCallback: ccurl_data_callback = { buffer, size, count, userdata in
    let length = size * count
    let attempt = Unmanaged<Attempt>.fromOpaque(userdata!).takeUnretainedValue()
    let goOn = attempt.didReceiveHeaderLine(UnsafeRawBufferPointer(start: buffer, count: length))
    return goOn ? length : 0
}

let transferWriteCallback: ccurl_data_callback = { buffer, size, count, userdata in
    let length = size * count
    let attempt = Unmanaged<Attempt>.fromOpaque(userdata!).takeUnretainedValue()
    let result = attempt.didReceiveBody(UnsafeRawBufferPointer(start: buffer, count: length))
    switch result {
    case .consumed: return length
    // libcurl keeps these bytes and hands them over again once the engine unpauses.
    case .pause: return Int(CURL_WRITEFUNC_PAUSE)
    case .abort: return 0
    }
}

let transferReadCallback: ccurl_data_callback = { buffer, size, count, userdata in
    let attempt = Unmanaged<Attempt>.fromOpaque(userdata!).takeUnretainedValue()
    let target = UnsafeMutableRawBufferPointer(start: buffer, count: size * count)
    guard let upload = attempt.upload else { return Int(CURL_READFUNC_ABORT) }
    do throws(RequestError) {
        let count = try upload.read(into: target)
        // Bytes move: libcurl asks for more only as it sends what it has.
        attempt.lastActivityNanos = attempt.engine.turnNanos
        if upload.isAtEnd { attempt.requestBodySent() }
        return count
    } catch {
        // A body file that shrank or failed: this error, not the CURLcode of the abort.
        attempt.callbackFailure = error
        return Int(CURL_READFUNC_ABORT)
    }
}

let transferSeekCallback: ccurl_seek_callback = { userdata, offset, origin in
    let attempt = Unmanaged<Attempt>.fromOpaque(userdata!).takeUnretainedValue()
    guard origin == SEEK_SET, attempt.upload?.seek(to: Int64(offset)) == true else {
        return CURL_SEEKFUNC_CANTSEEK
    }
    return CURL_SEEKFUNC_OK
}

let transferPrerequestCallback: ccurl_prereq_callback = { userdata, peerAddress, _, peerPort, localPort in
    let attempt = Unmanaged<Attempt>.fromOpaque(userdata!).takeUnretainedValue()
    let goOn = attempt.requestWillBeSent(peerAddress: peerAddress, localPort: Int(localPort), peerPort: Int(peerPort))
    return goOn ? CURL_PREREQFUNC_OK : CURL_PREREQFUNC_ABORT
}

let transferProgressCallback: ccurl_xferinfo_callback = { userdata, dltotal, dlnow, ultotal, ulnow in
    let attempt = Unmanaged<Attempt>.fromOpaque(userdata!).takeUnretainedValue()
    if attempt.cancelRequested.load(ordering: .relaxed) { return 1 }
    attempt.progressTick(dltotal: Int64(dltotal), dlnow: Int64(dlnow), ultotal: Int64(ultotal), ulnow: Int64(ulnow))
    return 0
}

extension Attempt {
    /// The shortest interval between two progress reports of one transfer.
    static let progressInterval: UInt64 = 50_000_000

    /// Called before each request of this transfer goes out on a connection, once it is made
    /// (TLS included), with the connection's ends; returns false to stop it, unsent. The stall
    /// clocks start here (``requestGoesOut()``).
    ///
    /// An HTTP/1 connection that libcurl reuses must have nothing to read before the request
    /// goes out: bytes waiting there are the surplus of an earlier response (a server that sent
    /// more than its `Content-Length`), and libcurl 7.88 would read them as this request's
    /// answer — a complete fake response (`HTTP/1.1 200 OK … EVIL`) would be taken as it is.
    /// libcurl closes a connection only when the surplus came in the same read as the body; it
    /// reuses one where it arrived later. So the socket is looked at (`MSG_PEEK`, nothing is
    /// taken) and a request that would meet such bytes is stopped before it is sent, which
    /// closes that connection (see ``metStrayBytesBeforeRequest``). A new connection is not
    /// looked at (a TLS one may still have handshake records waiting), nor an HTTP/2 one,
    /// whose socket ``HTTP1Sockets`` does not hold.
    ///
    /// Then, for requests that are not idempotent: libcurl sends a request again, on a new
    /// connection, when a reused connection closed without a byte of answer — whatever its
    /// method. For a POST or PATCH that is not its call to make: the server may have received
    /// it and acted on it before the connection went (RFC 9110, 9.2.2). So a request sent
    /// before that had no answer is not sent again: the transfer fails with `gotNothing`, which
    /// ``RequestOperation/autoRetry`` retries only when the caller turned it on. A request
    /// after an answer (a redirect followed) goes out.
    func requestWillBeSent(peerAddress: UnsafePointer<CChar>?, localPort: Int, peerPort: Int) -> Bool {
        requestGoesOut()
        let key = HTTP1Sockets.Key(localPort: localPort, peerPort: peerPort, peerAddress: peerAddress)
        if let socket = engine.http1Sockets.socket(for: key), ccurl_socket_has_bytes_waiting(socket) != 0,
           let easy, !isFirstRequestOnANewConnection(easy) {
            metStrayBytesBeforeRequest = true
            return false
        }
        defer {
            requestsSent += 1
            answered = false
        }
        guard requestsSent > 0, !answered, !Self.isIdempotent(request.method) else { return true }
        callbackFailure = .transport(TransportFailure(
            code: .gotNothing,
            message: "the connection closed without an answer; a \(request.method) is not sent again by itself, as the server may have acted on it"))
        return false
    }

    /// Whether the request about to go out is this transfer's first and libcurl opened its
    /// connection for it (a later one of the transfer, after a redirect, may reuse that one).
    private func isFirstRequestOnANewConnection(_ easy: UnsafeMutableRawPointer) -> Bool {
        guard requestsSent == 0 else { return false }
        var opened = 0
        return ccurl_easy_getinfo_long(easy, CURLINFO_NUM_CONNECTS, &opened) == CURLE_OK && opened > 0
    }

    /// Returns false to stop the transfer at this head (a 303 not to be followed).
    func didReceiveHeaderLine(_ line: UnsafeRawBufferPointer) -> Bool {
        answered = true
        lastActivityNanos = engine.turnNanos
        // Most lines are fields, only kept: nothing else to look at until a head completes.
        guard head.consume(line) else { return true }
        if let status = head.status, status >= 200 {
            headClockStart = 0  // the next request's head, after a redirect, starts it again
            finalHeadReceived = !isRedirectLibcurlFollows
        }
        if head.status == 303, isSeeOtherLibcurlWouldFollowWrongly {
            stoppedAtSeeOther = true
            return false
        }
        if let file, head.status == 206, file.resumeOffset > 0 {
            progressBase = file.resumeOffset
        }
        if bodyStream != nil, headIsFinal {
            beginStream()
        }
        return true
    }

    /// A 303 (See Other) is followed with a GET (RFC 9110, 15.4.4), but libcurl 7.88 keeps a
    /// method it was given as `CURLOPT_CUSTOMREQUEST` (DELETE, PATCH, …) on every request of
    /// the chain: a DELETE answered "see /other" would delete /other. So a request with such a
    /// method stops at the 303, which is its response; GET, HEAD, POST and PUT follow it.
    private var isSeeOtherLibcurlWouldFollowWrongly: Bool {
        guard case .follow = request.redirectPolicy, head.fields[.location] != nil else { return false }
        let method = request.method
        return method != .get && method != .head && method != .post && method != .put
    }

    /// Whether the complete head is the one whose body the consumer gets: not an interim 1xx,
    /// not a redirect libcurl follows, not a status a retry may follow.
    private var headIsFinal: Bool {
        guard let status = head.status, status >= 200, !statusesNotStreamed.contains(status) else { return false }
        return !isRedirectLibcurlFollows
    }

    /// Whether the complete head is a redirect that libcurl follows (its body is not the response's).
    private var isRedirectLibcurlFollows: Bool {
        guard case .follow = request.redirectPolicy, let status = head.status else { return false }
        return [301, 302, 303, 307, 308].contains(status) && head.fields[.location] != nil && !stoppedAtSeeOther
    }

    /// Hands the head to the stream: the body goes there from now on, and the operation is no
    /// longer retried.
    private func beginStream() {
        guard let bodyStream, let status = head.status else { return }
        bodySink = .stream
        bodyStream.begin(ResponseHead(status: HTTPResponse.Status(code: status), headerFields: head.fields))
    }

    enum WriteResult {
        case consumed
        /// Return CURL_WRITEFUNC_PAUSE: the stream's consumer is behind.
        case pause
        /// Abort the transfer (with `callbackFailure` set).
        case abort
    }

    func didReceiveBody(_ bytes: UnsafeRawBufferPointer) -> WriteResult {
        lastActivityNanos = engine.turnNanos
        if isPaced, !mayReceive(bytes.count) { return .pause }  // Attempt+Pacing.swift
        if bodySink == .stream { return offerToStream(bytes) }
        return didReceiveBodyKept(bytes) ? .consumed : .abort
    }

    /// A streamed chunk: counted only once the stream took it (a refused one comes again).
    private func offerToStream(_ bytes: UnsafeRawBufferPointer) -> WriteResult {
        if let limit = request.maxResponseBodySize, bodyBytes + Int64(bytes.count) > limit {
            callbackFailure = .transport(TransportFailure(
                code: .fileSizeExceeded, message: "the response body is larger than the limit of \(limit) bytes"))
            return .abort
        }
        let accepted = bodyStream!.offer(bytes) { [engine, self] in engine.resume(self) }
        guard accepted else {
            isPaused = true  // until the engine unpauses it: no stall limit meanwhile
            return .pause
        }
        bodyBytes += Int64(bytes.count)
        return .consumed
    }

    /// Returns false to make libcurl abort the transfer (with `callbackFailure` set).
    private func didReceiveBodyKept(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if bodySink == .undecided {
            bodySink = request.discardsBody ? .discard : .memory
            if file != nil, let status = head.status, (200..<300).contains(status), request.method != .head {
                do {
                    try openDestination(status: status)
                    bodySink = .file
                    bodyBytes = file!.resumeOffset > 0 && status == 206 ? file!.resumeOffset : 0
                } catch {
                    callbackFailure = error
                    return false
                }
            }
        }
        bodyBytes += Int64(bytes.count)
        if let limit = request.maxResponseBodySize, bodyBytes > limit {
            if bodySink == .file { file?.discard() }
            callbackFailure = .transport(TransportFailure(
                code: .fileSizeExceeded, message: "the response body is larger than the limit of \(limit) bytes"))
            return false
        }
        if bodySink == .memory, let limit = request.maxInMemoryBodySize, bodyBytes > limit || (bodyBytes == Int64(bytes.count) && announcedLength > limit) {
            callbackFailure = .transport(TransportFailure(
                code: .fileSizeExceeded,
                message: "the response body is larger than the limit of \(limit) bytes for a body kept in memory (Request.maxInMemoryBodySize)"))
            return false
        }
        switch bodySink {
        case .discard, .stream:
            return true
        case .file:
            do {
                try file!.write(bytes)
            } catch {
                callbackFailure = error
                return false
            }
        case .memory, .undecided:
            memoryBody.append(bytes.assumingMemoryBound(to: UInt8.self))
        }
        return true
    }

    /// The head's `Content-Length`, or 0: read as its line came, not parsed from the head's
    /// fields again.
    private var announcedLength: Int64 {
        head.contentLength ?? 0
    }

    /// Opens the `.part` file for a 2xx body: appending when the server honoured our Range.
    private func openDestination(status: Int) throws(RequestError) {
        guard var file else { return }
        defer { self.file = file }
        if status == 206 {
            partialRange = try checkedPartialRange(&file)
        }
        let append = status == 206 && file.resumeOffset > 0
        try file.open(append: append)
        if !append { file.recordValidator(resumeValidator) }
    }

    /// What a later resume of this response's body sends as `If-Range`: its strong `ETag`, or
    /// its `Last-Modified` (RFC 9110, 13.1.5: a weak tag cannot be).
    private var resumeValidator: String? {
        if let etag = head.fields[.eTag], !etag.hasPrefix("W/"), DestinationFile.isUsableValidator(etag) { return etag }
        if let date = head.fields[.lastModified], DestinationFile.isUsableValidator(date) { return date }
        return nil
    }

    /// The `Content-Range` of a 206 for a file, which must start where the `.part` file ends
    /// (at 0 when no Range was asked for). Another range of a resume discards the `.part`
    /// file and runs the attempt again from byte 0; a part that was not asked for, and does
    /// not start the file, is refused with nothing written.
    func checkedPartialRange(_ file: inout DestinationFile) throws(RequestError) -> ContentRange {
        if let value = head.fields[.contentRange], let range = ContentRange(value), range.first == file.resumeOffset {
            return range
        }
        if file.resumeOffset > 0 {
            file.discard()
            rangeRefused = true
            restartPending = true
            throw .transport(TransportFailure(code: .rangeError, message: "the server answered another range than asked for"))
        }
        throw .transport(TransportFailure(
            code: .rangeError, message: "the server sent part of the file (206) that was not asked for"))
    }

    /// Reports progress, at most once per ``progressInterval``; what the interval holds back
    /// is reported when it ends (``heldProgress``).
    ///
    /// The download's is known only once the head of the response whose body it is has come:
    /// before it libcurl says `0 of nil`, even for a resumed download whose `.part` already has
    /// bytes, and the total (its `Content-Length`, plus the bytes on disk for a 206) only
    /// comes with the head. So before that head only an upload's progress is reported (with
    /// no download's), and from it on every call carries the bytes on disk of a resumed
    /// download and the total when the server sent one. libcurl's download count is that of
    /// the current response: a redirect's body is not counted, as no call is made for it.
    func progressTick(dltotal: Int64, dlnow: Int64, ultotal: Int64, ulnow: Int64) {
        let hasDownload = finalHeadReceived
        guard hasDownload || upload != nil else { return }
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let nanos = UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
        let download = hasDownload
            ? TransferProgress(bytesTransferred: progressBase + dlnow, totalBytes: dltotal > 0 ? progressBase + dltotal : nil)
            : nil
        let upload = TransferProgress(bytesTransferred: ulnow, totalBytes: ultotal > 0 ? ultotal : nil)
        guard nanos &- lastProgressNanos >= Self.progressInterval else {
            heldProgress = (download, upload)
            if !isInProgressFlushList { engine.flushProgress(of: self, at: lastProgressNanos &+ Self.progressInterval) }
            return
        }
        lastProgressNanos = nanos
        heldProgress = nil
        reportProgress(download: download, upload: upload)
    }
}
