import CCurl
import Foundation
import HTTPTypes

extension Attempt {
    /// Sets every option of `easy` for this attempt, on the engine thread. Throws for a
    /// request that cannot be sent; nothing is sent then.
    ///
    /// A handle whose last transfer had the same ``ReusableOptions`` and ended well gets only
    /// the URL and this transfer's pointers: every other option already has the value it
    /// would be given (see ``CurlEngine`` for when a handle is reset instead).
    func configure(_ handle: EasyHandle) throws(RequestError) {
        if let problem = request.problems.first { throw .invalidRequest(problem) }
        let rawScheme = request.target.scheme ?? ""
        let scheme = rawScheme == "http" || rawScheme == "https" ? rawScheme : rawScheme.lowercased()
        // The default set is one set shared by every request, so comparing with it is an
        // identity check; it needs no hashing of the scheme, here or for the protocol list.
        let allowed = request.allowedSchemes
        let webOnly = allowed == Request.webSchemes
        // An exact match is the common case and needs no lowercasing of every allowed scheme.
        guard webOnly
            ? scheme == "http" || scheme == "https"
            : allowed.contains(rawScheme) || allowed.contains(where: { $0.lowercased() == scheme }) else {
            throw .invalidRequest("scheme \(scheme.isEmpty ? "(none)" : scheme) is not allowed")
        }
        if let destination = request.destination, bodyStream == nil {
            file = try DestinationFile(
                destination: destination, resume: (request.resume || number > 1) && !rangeRefused,
                digests: request.fileDigests, keepsValidator: request.keepsValidatorOnFile, source: request.partFileSource)
        }
        let easy = handle.easy
        self.easy = easy

        let this = Unmanaged.passUnretained(self).toOpaque()
        var status = CURLE_OK
        func set(_ option: CURLoption, _ value: Int) { if status == CURLE_OK { status = ccurl_easy_setopt_long(easy, option, value) } }
        // `withCString`, not the implicit conversion of a String argument, which copies it.
        func set(_ option: CURLoption, _ value: String) {
            if status == CURLE_OK { status = value.withCString { ccurl_easy_setopt_string(easy, option, $0) } }
        }

        handle.errorBuffer[0] = 0
        urlString = request.target.absoluteString
        let protocols = webOnly ? Self.webProtocolList : Self.protocolList(allowed)
        let https = scheme == "https"
        let reusable = hasReusableOptions
        if reusable, let held = handle.configuration, held.value.match(self, https: https, protocols: protocols) {
            set(CURLOPT_URL, urlString)
            setTransferPointers(easy, this)
            if status != CURLE_OK {
                throw .invalidRequest("libcurl refused an option: \(String(cString: curl_easy_strerror(status)))")
            }
            return
        }
        handle.prepareForNewConfiguration()
        _ = ccurl_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, handle.errorBuffer)
        set(CURLOPT_URL, urlString)
        set(CURLOPT_PROTOCOLS_STR, protocols)
        set(CURLOPT_REDIR_PROTOCOLS_STR, protocols)
        set(CURLOPT_NOSIGNAL, 1)
        // A transfer ended while its name is being resolved (a cancel, its connect limit) leaves
        // libcurl's resolver thread to finish on its own: without this, libcurl 7.87+ joins it,
        // and the engine thread, every other transfer with it, waits out getaddrinfo (10 s and
        // more with a resolver that does not answer).
        set(CURLOPT_QUICK_EXIT, 1)
        // Connections stay out of processes the program starts (see the C shim).
        if status == CURLE_OK { status = ccurl_easy_open_sockets_cloexec(easy) }
        if freshConnection { set(CURLOPT_FRESH_CONNECT, 1) }
        set(CURLOPT_TCP_KEEPALIVE, 1)
        // A larger receive buffer than libcurl's 16 KiB lets big bodies arrive in a fraction of
        // the reads and callbacks (see `receiveBufferSize` for its size). A hint: libcurl 7.88
        // refuses it (CURLE_BAD_FUNCTION_ARGUMENT) on a handle that still holds the buffer of a
        // transfer removed mid-way (a cancel); the default then applies to this transfer, and
        // the handle does not keep its options (below), so that the next one sets the size again.
        let bufferSizeTaken = ccurl_easy_setopt_long(easy, CURLOPT_BUFFERSIZE, receiveBufferSize) == CURLE_OK
        if scheme == "https" {
            // Wait for a connection that may multiplex (HTTP/2 via ALPN) rather than open
            // another. Not for http: with no HTTP/2 there, libcurl would make every other
            // transfer to a new origin wait for the first one's response.
            set(CURLOPT_PIPEWAIT, 1)
        }

        switch request.redirectPolicy {
        case .none:
            set(CURLOPT_FOLLOWLOCATION, 0)
        case .follow(let max):
            if followsRedirectsItself == nil { followsRedirectsItself = mustFollowRedirectsItself }
            if followsRedirectsItself == true {
                // The caller's fields must not reach another origin: see Attempt+Redirects.swift.
                set(CURLOPT_FOLLOWLOCATION, 0)
            } else {
                set(CURLOPT_FOLLOWLOCATION, 1)
                set(CURLOPT_MAXREDIRS, Swift.max(0, max))
            }
        }
        set(CURLOPT_UNRESTRICTED_AUTH, 0)

        if let connect = request.timeouts.connect { set(CURLOPT_CONNECTTIMEOUT_MS, Swift.max(1, connect.clampedMilliseconds)) }
        if let total = request.timeouts.total { set(CURLOPT_TIMEOUT_MS, Swift.max(1, total.clampedMilliseconds)) }
        // `timeouts.idle` and `timeouts.head` are the engine's (CurlEngine.endStalledTransfers).
        if let low = request.timeouts.lowSpeed {
            // libcurl fails it with CURLE_OPERATION_TIMEDOUT, retried like any time-out.
            set(CURLOPT_LOW_SPEED_LIMIT, Swift.max(1, low.bytesPerSecond))
            set(CURLOPT_LOW_SPEED_TIME, Swift.max(1, Int((low.duration.clampedMilliseconds + 999) / 1000)))
        }

        if let limit = announcedBodyLimit {
            // libcurl refuses a body whose Content-Length is over the limit before it arrives;
            // the write callback enforces it on the others.
            _ = ccurl_easy_setopt_off_t(easy, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(Swift.max(0, limit)))
        }

        if let caFile = request.tls.caFile { set(CURLOPT_CAINFO, caFile) }
        if let caDirectory = request.tls.caDirectory { set(CURLOPT_CAPATH, caDirectory) }
        if let pin = request.tls.pinnedPublicKey { set(CURLOPT_PINNEDPUBLICKEY, pin) }
        if request.tls.insecureSkipsVerificationForLocalTestingOnly {
            // (RequestOperation.init logged the warning, off the engine thread.)
            set(CURLOPT_SSL_VERIFYPEER, 0)
            set(CURLOPT_SSL_VERIFYHOST, 0)
        }

        // Every request: the stall clocks start there, stray bytes on a reused connection, and
        // no resend of a request that is not idempotent (see `requestWillBeSent`). Its data is
        // set with the other pointers.
        _ = ccurl_easy_setopt_prereq_callback(easy, transferPrerequestCallback)
        let sendsBody = try configureMethodAndBody(easy, status: &status)
        configureHeaders(easy, sendsBody: sendsBody)

        if let file, file.resumeOffset > 0 { set(CURLOPT_RANGE, "\(file.resumeOffset)-") }

        _ = ccurl_easy_setopt_data_callback(easy, CURLOPT_WRITEFUNCTION, transferWriteCallback)
        _ = ccurl_easy_setopt_data_callback(easy, CURLOPT_HEADERFUNCTION, transferHeaderCallback)
        if wantsProgress {
            _ = ccurl_easy_setopt_xferinfo_callback(easy, transferProgressCallback)
            set(CURLOPT_NOPROGRESS, 0)
        }
        setTransferPointers(easy, this)

        if status != CURLE_OK {
            throw .invalidRequest("libcurl refused an option: \(String(cString: curl_easy_strerror(status)))")
        }
        handle.configuration = bufferSizeTaken && reusable ? SharedValue(reusableOptions(https: https, protocols: protocols)) : nil
    }

    /// The options that point at this transfer: the engine's way back to it, and the
    /// callbacks' userdata.
    private func setTransferPointers(_ easy: UnsafeMutableRawPointer, _ this: UnsafeMutableRawPointer) {
        _ = ccurl_easy_setopt_pointer(easy, CURLOPT_PRIVATE, this)
        _ = ccurl_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, this)
        _ = ccurl_easy_setopt_pointer(easy, CURLOPT_HEADERDATA, this)
        _ = ccurl_easy_setopt_pointer(easy, CURLOPT_PREREQDATA, this)
        if wantsProgress { _ = ccurl_easy_setopt_pointer(easy, CURLOPT_XFERINFODATA, this) }
    }

    /// Whether this transfer's options hold nothing of its own — no body, no header fields, no
    /// Range, no speed limit — so that a handle may keep them for a like transfer (``ReusableOptions``).
    /// The handles of the others are reset after them.
    private var hasReusableOptions: Bool {
        guard !freshConnection, request.body == nil, request.headerFields.isEmpty, file.map({ $0.resumeOffset == 0 }) ?? true,
              request.maxReceiveSpeed == nil, request.sharedReceiveLimit == nil else { return false }
        let method = request.method
        // POST, PUT and PATCH send an empty body; other methods that are not idempotent are
        // rare enough to be left out.
        return method != .post && method != .put && method != .patch && Self.isIdempotent(method)
    }

    /// Everything but the URL and the transfer's pointers that decides the options
    /// ``configure(_:)`` sets, for a transfer with ``hasReusableOptions``. Built only for a
    /// handle to keep: a transfer is compared with a handle's options in place
    /// (``ReusableOptions/match(_:https:protocols:)``, at the end of this file), as building
    /// them copied and retained every string they hold, on each transfer.
    fileprivate func reusableOptions(https: Bool, protocols: String) -> ReusableOptions {
        ReusableOptions(
            method: request.method, https: https, protocols: protocols, redirectPolicy: request.redirectPolicy,
            timeouts: request.timeouts, maxResponseBodySize: request.maxResponseBodySize,
            announcedBodyLimit: announcedBodyLimit, tls: request.tls,
            wantsProgress: wantsProgress, receiveBufferSize: receiveBufferSize)
    }

    /// The limit libcurl checks an announced `Content-Length` against: `maxResponseBodySize`,
    /// and `maxInMemoryBodySize` too when the body can go nowhere but to memory (no
    /// destination, not discarded, not streamed).
    var announcedBodyLimit: Int64? {
        let inMemoryOnly = file == nil && bodyStream == nil && !request.discardsBody
        guard inMemoryOnly, let memoryLimit = request.maxInMemoryBodySize else { return request.maxResponseBodySize }
        return Swift.min(memoryLimit, request.maxResponseBodySize ?? .max)
    }

    /// Returns whether a request body is sent.
    private func configureMethodAndBody(_ easy: UnsafeMutableRawPointer, status: inout CURLcode) throws(RequestError) -> Bool {
        let method = request.method
        var body = request.body
        if body == nil, method == .post || method == .put || method == .patch { body = .bytes(Data()) }

        if let body {
            let source = try UploadSource(body)
            upload = source
            if let channel = source.stream {
                try configureStreamedBody(easy, channel)  // Attempt+StreamedUpload.swift
            } else {
                let this = Unmanaged.passUnretained(self).toOpaque()
                _ = ccurl_easy_setopt_data_callback(easy, CURLOPT_READFUNCTION, transferReadCallback)
                _ = ccurl_easy_setopt_pointer(easy, CURLOPT_READDATA, this)
                _ = ccurl_easy_setopt_seek_callback(easy, transferSeekCallback)
                _ = ccurl_easy_setopt_pointer(easy, CURLOPT_SEEKDATA, this)
            }
            // A size of -1 (a stream of unknown length) makes libcurl send the body chunked on
            // HTTP/1.1.
            if method == .post {
                // POST keeps curl's redirect rules (301/302/303 become GET).
                if status == CURLE_OK { status = ccurl_easy_setopt_long(easy, CURLOPT_POST, 1) }
                _ = ccurl_easy_setopt_off_t(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(source.count))
            } else {
                if status == CURLE_OK { status = ccurl_easy_setopt_long(easy, CURLOPT_UPLOAD, 1) }
                _ = ccurl_easy_setopt_off_t(easy, CURLOPT_INFILESIZE_LARGE, curl_off_t(source.count))
                if method != .put { _ = method.rawValue.withCString { ccurl_easy_setopt_string(easy, CURLOPT_CUSTOMREQUEST, $0) } }
            }
            return true
        } else if method == .head {
            if status == CURLE_OK { status = ccurl_easy_setopt_long(easy, CURLOPT_NOBODY, 1) }
        } else {
            if status == CURLE_OK { status = ccurl_easy_setopt_long(easy, CURLOPT_HTTPGET, 1) }
            if method != .get { _ = method.rawValue.withCString { ccurl_easy_setopt_string(easy, CURLOPT_CUSTOMREQUEST, $0) } }
        }
        return false
    }

    private func configureHeaders(_ easy: UnsafeMutableRawPointer, sendsBody: Bool) {
        // libcurl adds `Expect:` and a form Content-Type only to requests with a body: a
        // bodiless request with no fields of its own needs no list (nor its allocations).
        let ifRange = file.flatMap { $0.resumeOffset > 0 && request.headerFields[.ifRange] == nil ? $0.resumeValidator : nil }
        if request.headerFields.isEmpty, !sendsBody, ifRange == nil { return }
        var list: UnsafeMutablePointer<curl_slist>?
        func append(_ line: String) {
            if let extended = line.withCString({ curl_slist_append(list, $0) }) { list = extended }
        }
        for field in request.headerFields {
            // "Name;" is curl's way of sending a field with an empty value.
            append(field.value.isEmpty ? "\(field.name.rawName);" : "\(field.name.rawName): \(field.value)")
        }
        // No `Expect: 100-continue` wait, and no curl-made form Content-Type, unless asked for.
        if sendsBody, request.headerFields[.expect] == nil { append("Expect:") }
        if request.method == .post, request.headerFields[.contentType] == nil { append("Content-Type:") }
        if let ifRange { append("If-Range: \(ifRange)") }
        headerList = list
        _ = ccurl_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, list)
    }

    /// The receive buffer libcurl reads this transfer's responses into (CURLOPT_BUFFERSIZE).
    ///
    /// libcurl 7.88 allocates it at each transfer's start and frees it at its end, so for a
    /// body kept in memory, streamed or discarded it stays under glibc's threshold for mapping
    /// an allocation on its own (128 KiB): at 512 KiB each transfer mapped fresh pages and
    /// faulted them in, two page faults per 1 KiB GET and a third of its CPU time. A body
    /// written to a file gets 512 KiB: each read becomes one `write(2)`, whose fixed cost
    /// (the file system's bookkeeping per call) made 8 files of 256 MiB arrive at 680 MiB/s
    /// with 120 KiB against 1,150 MiB/s with 512 KiB. Since `CurlEngine.prepareAllocator()`
    /// both sizes come from the engine thread's heap, and its top keeps the buffers freed by
    /// the transfers that end together (see there).
    ///
    /// A transfer with a receive-speed limit reads at most an eighth of a second of it at once
    /// (16 KiB at least): the pacing (Attempt+Pacing.swift) holds a transfer back between
    /// reads, so one read of a whole buffer is a burst above the rate.
    var receiveBufferSize: Int {
        let size = file == nil ? Self.memoryReceiveBufferSize : Self.fileReceiveBufferSize
        guard let rate = [request.maxReceiveSpeed, request.sharedReceiveLimit?.bytesPerSecond].compactMap({ $0 }).min() else { return size }
        return Int(Swift.min(Int64(size), Swift.max(16 * 1024, rate / 8)))
    }
    static let memoryReceiveBufferSize = 120 * 1024
    static let fileReceiveBufferSize = 512 * 1024

    /// The protocols of the default ``Request/allowedSchemes`` for CURLOPT_PROTOCOLS_STR.
    static let webProtocolList = "http,https"

    /// The comma-separated protocols for CURLOPT_PROTOCOLS_STR, without building the string
    /// for a set equal to the default one.
    static func protocolList(_ schemes: Set<String>) -> String {
        if schemes.count == 2, schemes.contains("http"), schemes.contains("https") { return webProtocolList }
        return schemes.map { $0.lowercased() }.sorted().joined(separator: ",")
    }

    /// Frees what the attempt held of libcurl's, before the handle goes back to the pool.
    func releaseCurlResources() {
        if let headerList { curl_slist_free_all(headerList) }
        headerList = nil
        easy = nil
        upload = nil
    }
}

extension ReusableOptions {
    /// Whether these are the options `reusableOptions(https:protocols:)` would build for
    /// `transfer`, compared field by field without building them. The two must name the same
    /// fields: debug builds (the tests') check that this agrees with `==` on the built options.
    func match(_ attempt: Attempt, https: Bool, protocols: String) -> Bool {
        let request = attempt.request
        let matches = self.https == https && receiveBufferSize == attempt.receiveBufferSize
            && wantsProgress == attempt.wantsProgress && method == request.method
            && self.protocols == protocols && redirectPolicy == request.redirectPolicy
            && timeouts == request.timeouts && maxResponseBodySize == request.maxResponseBodySize
            && announcedBodyLimit == attempt.announcedBodyLimit && tls == request.tls
        assert(matches == (self == attempt.reusableOptions(https: https, protocols: protocols)),
               "match(_:https:protocols:) and reusableOptions(https:protocols:) name different fields")
        return matches
    }
}
