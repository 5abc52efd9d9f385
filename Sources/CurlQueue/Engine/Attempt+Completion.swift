import CCurl
import Foundation
import HTTPTypes

extension Attempt {
    /// What the engine does with a transfer whose libcurl work ended.
    enum Completion {
        /// Report this outcome.
        case finished(AttemptOutcome)
        /// The server refused or ignored the Range of a resume: run again from byte 0.
        case restart
    }

    /// Turns libcurl's result into an outcome, on the engine thread, and finishes the
    /// destination file: renamed into place after a complete 2xx body, kept as `.part` for a
    /// resume after a failure.
    func complete(code: CURLcode, errorBuffer: UnsafePointer<CChar>) -> Completion {
        guard let easy else { return .finished(.failure(.transport(TransportFailure(code: .failedInit, message: "no handle")))) }
        if restartPending { return .restart }
        if metStrayBytesBeforeRequest {
            file?.close()
            return strayBytesMet()
        }
        if let callbackFailure {
            file?.close()
            return .finished(.failure(callbackFailure))
        }
        if code != CURLE_OK, !stoppedAtSeeOther {
            file?.close()
            if metLeftoverBytes(code: code, easy: easy) {
                freshConnection = true
                return .restart
            }
            return .finished(.failure(Self.error(for: code, errorBuffer: errorBuffer)))
        }

        if !head.isComplete {
            // libcurl takes a connection closed in the middle of the head for a complete,
            // empty response; it is not one.
            file?.close()
            let failure = TransportFailure(code: .partialFile, message: "the connection closed before the response head was complete")
            return .finished(.failure(.transport(failure)))
        }

        // A complete head has its status; libcurl's is asked for only without one.
        var status = head.status ?? {
            var responseCode = 0
            _ = ccurl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &responseCode)
            return responseCode
        }()
        if status == 416, let file, file.resumeOffset > 0 {
            guard partHoldsTheWholeResource(file) else {
                // The .part file is as long as the resource, or longer: start again from empty.
                self.file?.discard()
                rangeRefused = true
                return .restart
            }
            // An earlier attempt stopped after the last byte, before the rename (a process
            // killed there): the .part is the file, and the server accepted its validator.
            do {
                try self.file?.open(append: true)
            } catch {
                self.file?.close()
                return .finished(.failure(error))
            }
            status = 200
            memoryBody = Data()  // the 416's own text, not the file's
        }

        if let hop = followRedirect(easy, status: status) {
            file?.close()
            return hop
        }

        var metrics = Self.metrics(easy)
        metrics.redirectCount += redirectsFollowed
        var response = Response(
            status: HTTPResponse.Status(code: status),
            fieldLines: head.fieldLines,
            body: memoryBody,
            fileURL: nil,
            effectiveTarget: effectiveURL(easy),
            httpVersion: head.version,
            metrics: metrics,
            attempts: number)
        memoryBody = Data()

        if var file {
            if (200..<300).contains(status), request.method != .head {
                do {
                    if status == 206 { try checkPartialContent(&file) }
                    try file.commit()
                    response.fileURL = file.destination
                    response.fileDigests = file.finishedDigests
                } catch {
                    file.close()
                    self.file = nil
                    // A 206 for another range than asked, with no body: from byte 0 again.
                    return restartPending ? .restart : .finished(.failure(error))
                }
            } else {
                file.close()
            }
            self.file = nil
        }
        return .finished(.response(response))
    }

    /// Whether a 416 to a resume means the `.part` already holds every byte: the server says
    /// the resource is exactly as long (`Content-Range: bytes */N`), and the request carried an
    /// `If-Range`, which a server answers with the whole new version (200), not a 416, when the
    /// resource changed.
    private func partHoldsTheWholeResource(_ file: DestinationFile) -> Bool {
        guard file.resumeValidator != nil || request.headerFields[.ifRange] != nil,
              let value = head.fields[.contentRange],
              let length = ContentRange.unsatisfiedCompleteLength(value) else { return false }
        return length == file.resumeOffset
    }

    /// The prerequest callback stopped a request, unsent, on a reused connection that held
    /// bytes of no response; libcurl closed that connection. The transfer runs again, once,
    /// on a new connection (`CURLOPT_FRESH_CONNECT`), whatever its method when no request of
    /// it went out yet: nothing reached the server. A request after one that went out (a
    /// redirect followed on that connection) runs again only when idempotent, as running
    /// again sends the first one too.
    private func strayBytesMet() -> Completion {
        if !freshConnection, !cancelRequested.load(ordering: .relaxed), requestsSent == 0 || Self.isIdempotent(request.method) {
            freshConnection = true
            return .restart
        }
        return .finished(.failure(.transport(TransportFailure(
            code: .weirdServerReply,
            message: "bytes of no response were waiting on the reused connection before the request went out; it was not sent"))))
    }

    /// Notes the socket of the HTTP/1 connection this response came on, if libcurl keeps it,
    /// for the check before a request reuses it (see ``HTTP1Sockets``). Called by the engine
    /// for a transfer libcurl completed, before it leaves the multi handle.
    func noteHTTP1Socket(_ easy: UnsafeMutableRawPointer) {
        guard head.isComplete, head.version.major == 1 else { return }
        var socket = CURL_SOCKET_BAD
        var localPort = 0
        var peerPort = 0
        var peerAddress: UnsafeMutablePointer<CChar>?
        guard ccurl_easy_getinfo_socket(easy, CURLINFO_ACTIVESOCKET, &socket) == CURLE_OK, socket != CURL_SOCKET_BAD,
              ccurl_easy_getinfo_long(easy, CURLINFO_LOCAL_PORT, &localPort) == CURLE_OK,
              ccurl_easy_getinfo_long(easy, CURLINFO_PRIMARY_PORT, &peerPort) == CURLE_OK,
              ccurl_easy_getinfo_string(easy, CURLINFO_PRIMARY_IP, &peerAddress) == CURLE_OK else { return }
        engine.http1Sockets.record(socket, for: HTTP1Sockets.Key(localPort: localPort, peerPort: peerPort, peerAddress: peerAddress))
    }

    /// Checks that a 206 made the `.part` file whole: its range started where the file ended
    /// and ran to the end of the resource, and every byte of it arrived. A 206 with no body, a
    /// shorter range than the rest of the file, or fewer bytes than the range leaves the
    /// `.part` file as it is (what it holds is the start of the file, for a later resume) and
    /// fails with `partialFile`, which a retry resumes.
    private func checkPartialContent(_ file: inout DestinationFile) throws(RequestError) {
        guard file.isOpen else {
            // No body: nothing was checked or written yet.
            let range = try checkedPartialRange(&file)
            throw .transport(TransportFailure(
                code: .partialFile, message: "the server answered 206 for bytes \(range.first)-\(range.last) with no body"))
        }
        guard let range = partialRange else { return }
        let end = range.last + 1
        if file.bytesWritten != end {
            throw .transport(TransportFailure(
                code: .partialFile,
                message: "the server announced bytes \(range.first)-\(range.last) and sent \(file.bytesWritten - range.first)"))
        }
        if let complete = range.completeLength, end != complete {
            throw .transport(TransportFailure(
                code: .partialFile, message: "the server sent bytes \(range.first)-\(range.last) of \(complete): the file is not complete"))
        }
    }

    /// Whether this failure is a reused connection's fault, not the server's answer to this
    /// request, and the request may be sent once more on a new connection.
    ///
    /// A kept-alive HTTP/1.1 connection can hold bytes of no response: a server sent more than
    /// its Content-Length announced, or a body after a HEAD answer, and they arrived after
    /// libcurl had checked the connection before reusing it. libcurl then reads them where the
    /// next response starts and refuses them (code 1: HTTP/0.9, or an HTTP version it does not
    /// know), and the request's own answer never gets a chance.
    ///
    /// It runs again, once, on a new connection when it was refused that way on a reused
    /// connection (no connection opened, no status, nothing of a response taken) and its
    /// method is idempotent: the server may have acted on the request already, so a POST or
    /// PATCH is never sent twice. A scheme or redirect libcurl refuses (code 1 too) has a
    /// status or opened no connection to reuse, and is not run again.
    func metLeftoverBytes(code: CURLcode, easy: UnsafeMutableRawPointer) -> Bool {
        guard code == CURLE_UNSUPPORTED_PROTOCOL,
              !freshConnection, !cancelRequested.load(ordering: .relaxed),
              bodySink == .undecided, bodyBytes == 0, !head.isComplete,
              Self.isIdempotent(request.method) else { return false }
        var connectionsOpened = 0
        var status = 0
        guard ccurl_easy_getinfo_long(easy, CURLINFO_NUM_CONNECTS, &connectionsOpened) == CURLE_OK,
              ccurl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK else { return false }
        return connectionsOpened == 0 && status == 0
    }

    /// RFC 9110 section 9.2.2: sending these twice has the effect of sending them once.
    static func isIdempotent(_ method: HTTPRequest.Method) -> Bool {
        method == .get || method == .head || method == .put || method == .delete || method == .options || method == .trace
    }

    /// The engine let go of a cancelled transfer: keep the `.part` file for a later resume.
    func abandon() {
        file?.close()
        file = nil
    }

    static func error(for code: CURLcode, errorBuffer: UnsafePointer<CChar>) -> RequestError {
        let detail = String(cString: errorBuffer)
        let message = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
        let failure = TransportFailure(code: CurlCode(rawValue: Int32(code.rawValue)), message: message)
        switch failure.code {
        case .operationTimedOut: return .timedOut(failure)
        case .urlMalformat: return .invalidRequest("malformed URL: \(message)")
        default: return .transport(failure)
        }
    }

    /// The URL of the final response: the request's own URL when libcurl ended where it
    /// started (no redirect), as the request holds it (a string is not parsed); else
    /// libcurl's, parsed.
    private func effectiveURL(_ easy: UnsafeMutableRawPointer) -> LazyURL? {
        var pointer: UnsafeMutablePointer<CChar>?
        guard ccurl_easy_getinfo_string(easy, CURLINFO_EFFECTIVE_URL, &pointer) == CURLE_OK, let pointer else { return nil }
        let target = request.target
        if !target.hasBase, urlString.withCString({ strcmp($0, pointer) == 0 }) { return target }
        return URL(string: String(cString: pointer)).map(LazyURL.parsed)
    }

    private static func metrics(_ easy: UnsafeMutableRawPointer) -> TransferMetrics {
        func micros(_ info: CURLINFO) -> Duration {
            var value: curl_off_t = 0
            _ = ccurl_easy_getinfo_off_t(easy, info, &value)
            return .microseconds(Int64(value))
        }
        func count(_ info: CURLINFO) -> Int64 {
            var value: curl_off_t = 0
            _ = ccurl_easy_getinfo_off_t(easy, info, &value)
            return Int64(value)
        }
        func long(_ info: CURLINFO) -> Int {
            var value = 0
            _ = ccurl_easy_getinfo_long(easy, info, &value)
            return value
        }
        return TransferMetrics(
            nameLookup: micros(CURLINFO_NAMELOOKUP_TIME_T),
            connect: micros(CURLINFO_CONNECT_TIME_T),
            tlsHandshake: micros(CURLINFO_APPCONNECT_TIME_T),
            timeToFirstByte: micros(CURLINFO_STARTTRANSFER_TIME_T),
            total: micros(CURLINFO_TOTAL_TIME_T),
            bytesSent: count(CURLINFO_SIZE_UPLOAD_T),
            bytesReceived: count(CURLINFO_SIZE_DOWNLOAD_T),
            redirectCount: long(CURLINFO_REDIRECT_COUNT),
            connectionsOpened: long(CURLINFO_NUM_CONNECTS))
    }
}
