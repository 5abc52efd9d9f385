import ArgumentParser
import CurlQueue
import CurlQueueDownloads
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The transfer options of `curlq get` and `curlq daemon`, spelled and meant alike in both:
/// TLS trust, headers and User-Agent, credentials (resolved by the process that runs the
/// transfer, never stored), time limits and speeds.
struct TransferOptions: ParsableArguments {
    // MARK: TLS trust (curl's options and environment variables)

    @Option(name: .customLong("cacert"),
            help: ArgumentHelp("PEM file of CA certificates to trust instead of the system's, as curl's --cacert (default: $CURL_CA_BUNDLE, else $SSL_CERT_FILE).", valueName: "FILE"))
    var caCert: String?

    @Option(name: .customLong("capath"),
            help: ArgumentHelp("Folder of hashed CA certificates (c_rehash) to trust (default: $SSL_CERT_DIR).", valueName: "DIR"))
    var caPath: String?

    @Option(name: .customLong("pinnedpubkey"),
            help: ArgumentHelp("The server's public key must match: sha256//BASE64 (several joined with ';') or a PEM/DER key file.", valueName: "KEY"))
    var pinnedPublicKey: String?

    @Flag(name: [.customShort("k"), .customLong("insecure")],
          help: "INSECURE: accept any certificate for any host name (a warning is printed on every run). A --pinnedpubkey is still checked.")
    var insecure = false
    // MARK: Time limits (a stall limit on by default; the whole-file limit named as such)

    @Option(name: .customLong("max-file-time"),
            help: ArgumentHelp("Most time for the whole of one file, retries and their waits included (default: none). Not a stall limit: see --stall-timeout.", valueName: "SECONDS"))
    var timeout: Double?

    @Option(name: .customLong("stall-timeout"),
            help: ArgumentHelp("Fail an attempt when no byte has moved for this long, and retry it like a network error (default 60; 0 for none).", valueName: "SECONDS"))
    var stallTimeout: Double = 60

    @Option(name: .customLong("connect-timeout"),
            help: ArgumentHelp("Most time to connect (default 30).", valueName: "SECONDS"))
    var connectTimeout: Double?

    // MARK: Speeds (lowest speed as curl's --speed-limit/--speed-time; bandwidth limits; TransferOptions+Rates.swift)

    @Option(name: [.customLong("speed-limit"), .customLong("lowest-speed-limit")],
            help: ArgumentHelp("Fail an attempt slower than RATE bytes/s (500K, 2M, …) for --speed-time, and retry it like a network error (default: none).", valueName: "RATE"))
    var speedLimit: String?

    @Option(name: .customLong("speed-time"),
            help: ArgumentHelp("How long an attempt may stay below --speed-limit, as curl's.", valueName: "SECONDS"))
    var speedTime: Double = 30

    @Option(name: .customLong("limit-rate"),
            help: ArgumentHelp("Receive each file at most RATE bytes/s: 500K, 2M, 1G (K = 1024), as curl's (default: none); a split file (-s) too, all its ranges together.", valueName: "RATE"))
    var limitRate: String?

    @Option(name: .customLong("max-overall-rate"),
            help: ArgumentHelp("Receive at most RATE bytes/s for the whole run, all files together, as aria2's --max-overall-download-limit (default: none).", valueName: "RATE"))
    var maxOverallRate: String?
    @Option(name: [.customShort("H"), .customLong("header")],
            help: ArgumentHelp("A header for every URL, 'Name: value'. Repeatable; an input file's header= overrides it.", valueName: "HEADER"))
    var headers: [String] = []
    @Option(name: [.customShort("A"), .customLong("user-agent")],
            help: ArgumentHelp("The User-Agent header to send (default \(CurlqVersion.userAgent)); '' sends none. A -H or header= User-Agent wins.", valueName: "NAME"))
    var userAgent: String?
    // MARK: Credentials (-u, --netrc, --netrc-file, -b; sent only to the origin they were given for)

    @Option(name: [.customShort("u"), .customLong("user")],
            help: ArgumentHelp("Basic authentication for every URL, 'user:password' (no prompt). Never shown; not sent past a redirect to another origin.", valueName: "USER:PASSWORD"))
    var user: String?

    @Flag(name: .customLong("netrc"), help: "Take each URL's login and password from ~/.netrc (its host's 'machine' entry, else 'default').")
    var netrc = false

    @Option(name: .customLong("netrc-file"),
            help: ArgumentHelp("As --netrc, from FILE.", valueName: "FILE"))
    var netrcFile: String?

    @Option(name: [.customShort("b"), .customLong("cookie")],
            help: ArgumentHelp("Cookies: a Netscape cookie file (curl -c, wget --save-cookies), or 'name=value; …' sent to every URL.", valueName: "FILE|DATA"))
    var cookie: String?

    /// `-H` as fields (checked by ``validate(jobs:)``).
    var headerFields: [HeaderField] { headers.compactMap { try? HeaderField.parse($0).get() } }

    /// Checks every transfer option; `jobs` (transfers at once, 0 for no limit) for the speeds.
    func validate(jobs: Int) throws {
        try validateRates(jobs: jobs)
        guard stallTimeout.isFinite, stallTimeout >= 0, stallTimeout <= 1e9 else {
            throw ValidationError("--stall-timeout must be a number of seconds, 0 for none, not \(stallTimeout)")
        }
        for (name, value) in [("--max-file-time", timeout), ("--connect-timeout", connectTimeout)] {
            if let value, !(value.isFinite && value > 0 && value <= 1e9) {
                throw ValidationError("\(name) must be a number of seconds above 0, not \(value)")
            }
        }
        if let userAgent, case .failure(let problem) = HeaderField.parse("User-Agent: " + userAgent) {
            throw ValidationError("-A/--user-agent: \(problem)")
        }
        for header in headers {
            if case .failure(let problem) = HeaderField.parse(header) { throw ValidationError("-H \(quoted(header)): \(problem)") }
        }
        if let user, case .failure(let problem) = Credentials.parseUser(user) { throw ValidationError(problem.message) }
    }

    /// `--cacert`, `--capath`, `--pinnedpubkey` and `-k`, with curl's environment variables as
    /// defaults; a CA file or folder that is not there is a usage error naming where it came from.
    func tlsOptions(_ environment: [String: String]) throws -> Request.TLSOptions {
        func given(_ option: String?, _ name: String, _ variables: [String]) -> (String, String)? {
            if let option { return (option, name) }
            for variable in variables { if let value = environment[variable], !value.isEmpty { return (value, "$" + variable) } }
            return nil
        }
        var tls = Request.TLSOptions(pinnedPublicKey: pinnedPublicKey)
        if let (file, source) = given(caCert, "--cacert", ["CURL_CA_BUNDLE", "SSL_CERT_FILE"]) {
            guard FileKind.size(file) != nil, access(file, R_OK) == 0, FileKind.of(URL(fileURLWithPath: file).resolvingSymlinksInPath().path) != .directory else {
                throw UsageError("\(source): cannot read the CA file \(quoted(file))")
            }
            tls.caFile = file
        }
        if let (folder, source) = given(caPath, "--capath", ["SSL_CERT_DIR"]) {
            guard FileKind.of(URL(fileURLWithPath: folder).resolvingSymlinksInPath().path) == .directory else {
                throw UsageError("\(source): \(quoted(folder)) is not a folder")
            }
            tls.caDirectory = folder
        }
        tls.insecureSkipsVerificationForLocalTestingOnly = insecure
        return tls
    }
}
