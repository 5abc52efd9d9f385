import CurlQueue
import CurlQueueDownloads
import CurlQueueDurable
import Foundation

/// What `curlq daemon` applies to every job's request: the transfer options as daemon-wide
/// defaults. A job's own header fields win over `-H` and `-A`; credentials (`-u`, `--netrc`,
/// `-b`) are resolved here, in the daemon, for each job's URL, so that none is ever stored.
struct DaemonTransfer: Sendable {
    var headers: [HeaderField]
    var userAgent: String
    var tls: Request.TLSOptions
    var credentials: Credentials
    var connectTimeout: Double?
    var stallTimeout: Double?
    /// `--max-file-time`: here the limit of each attempt (a job's attempts are the store's).
    var attemptTimeout: Double?
    var lowSpeed: Request.Timeouts.LowSpeed?
    var limitRate: Int64?
    var overallRate: SharedRateLimit?

    init(_ options: TransferOptions, environment: [String: String]) throws {
        headers = options.headerFields
        userAgent = options.userAgent ?? CurlqVersion.userAgent
        tls = try options.tlsOptions(environment)
        credentials = try options.credentials(environment)
        connectTimeout = options.connectTimeout
        stallTimeout = options.stallTimeout > 0 ? options.stallTimeout : nil
        attemptTimeout = options.timeout
        var batch = BatchOptions(directory: URL(fileURLWithPath: "/"))
        try options.applyRates(to: &batch)
        lowSpeed = batch.lowSpeed
        limitRate = batch.limitRate
        overallRate = batch.overallRate
    }

    /// The job's request with the daemon's options under it: a time limit the job set
    /// (``JobRequest/timeouts``) is kept.
    func apply(to request: inout Request, job: JobRequest) {
        let jobs = request.headerFields.map { HeaderField(name: $0.name.rawName, value: $0.value) }
        var added = HeaderField.forRequest(global: headers, own: jobs, userAgent: userAgent)
            .filter { field in !jobs.contains { $0.name.lowercased() == field.name.lowercased() } }
        var credentials = credentials
        if let first = URL(string: job.url), MirrorRules.isForeign(request.url, first: first) {
            // A mirror on another origin gets none of what proves who the user is (`get`'s rule):
            // `-u` and `-H Authorization/Cookie` were given for the job's first URL.
            added.removeAll { MirrorRules.secretFields.contains($0.name.lowercased()) }
            credentials.user = nil
            credentials.cookieText = nil
        }
        let fields = jobs + added
        for field in added { request.addHeader(field.name, field.value) }
        for field in credentials.fields(for: request.url, besides: fields) { request.addHeader(field.name, field.value) }
        request.tls = tls
        var timeouts = request.timeouts
        let own = job.timeouts
        if own.connect == nil { timeouts.connect = connectTimeout.map(BatchRunner.duration) ?? .seconds(30) }
        if own.idle == nil { timeouts.idle = stallTimeout.map(BatchRunner.duration) }
        if own.total == nil { timeouts.total = attemptTimeout.map(BatchRunner.duration) }
        timeouts.lowSpeed = timeouts.lowSpeed ?? lowSpeed
        request.timeouts = timeouts
        request.maxReceiveSpeed = request.maxReceiveSpeed ?? limitRate
        request.sharedReceiveLimit = overallRate
    }
}
