import ArgumentParser
import CurlQueue
import CurlQueueDownloads
import CurlQueueDurable
import CurlQueuePostgres
import Foundation

/// `curlq daemon`: runs a durable worker on a store until SIGTERM or SIGINT.
struct DaemonCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "daemon",
        abstract: "Run the downloads of a job store, until SIGTERM or SIGINT.",
        discussion: """
            EXAMPLES:
              curlq daemon --store sqlite:jobs.db -d downloads -j 8
              curlq daemon --store postgres://cq@db.internal/jobs -d downloads --netrc

            Each job ends as 'curlq get' would end its file: done only when the file stands \
            complete under its name (a file already there is checked, never replaced); an error \
            status, spent retries, a checksum mismatch or a refused certificate is failed, with \
            the reason in words. The transfer options are get's, for every job; a job's own \
            header= lines win. Credentials (-u, --netrc, -b) stay in the daemon: the store never \
            holds them.

            It prints a line when it starts, one per finished or failed job (with the time when \
            standard output is not a terminal), and when it stops. On SIGTERM or SIGINT it stops \
            taking jobs, lets running downloads finish for up to --drain-timeout, then gives the \
            rest back to the store with their .part files kept, and exits 0. After a crash or \
            kill -9, the next start resumes the interrupted downloads.

            On PostgreSQL any number of daemons, on any number of machines, share one queue. \
            When the server goes away, running downloads go on and the daemon reconnects by \
            itself (backoff 0.1 s doubling to 5 s). A password is better in ~/.pgpass or \
            PGPASSWORD than in the URL; no message shows it. Exit 2: a bad URL; exit 1: the \
            server cannot be reached.
            """)

    @OptionGroup var storeOptions: StoreOptions

    @Option(name: [.customShort("d"), .customLong("dir")], help: ArgumentHelp("Folder to download into.", valueName: "DIR"))
    var directory: String = "."

    @Option(name: [.customShort("j"), .customLong("jobs"), .customLong("concurrency")],
            help: ArgumentHelp("Downloads at once (as get's -j; --concurrency is the older spelling).", valueName: "N"))
    var jobs: Int = 4

    @Option(name: .customLong("per-host"), help: ArgumentHelp("Downloads at once to one host (0: no limit).", valueName: "N"))
    var perHost: Int = 0

    @Option(name: .customLong("drain-timeout"), help: ArgumentHelp("Seconds running downloads get to finish on a stop.", valueName: "SECONDS"))
    var drainTimeout: Double = 30

    @Flag(name: [.customShort("q"), .customLong("quiet")], help: "Print nothing but errors.")
    var quiet = false

    @Flag(help: "Replace files that already exist, as get's --overwrite; without it each is checked (the job's checksum, else the size the server announces) and the job is done as already there, or failed when the file differs.")
    var overwrite = false

    @Flag(name: .customLong("exit-when-done"),
          help: "Stop (as on SIGTERM) once no job of the queue is waiting, delayed or running: one pass over a queue, for cron or a script.")
    var exitWhenDone = false

    /// aria2's JSON-RPC (docs/daemon.md).
    @OptionGroup(title: "JSON-RPC (aria2's)") var rpcOptions: RPCOptions

    /// Prometheus' `/metrics` without the RPC (docs/daemon.md).
    @OptionGroup(title: "Prometheus metrics") var metricsOptions: MetricsOptions

    /// TLS, headers, credentials, time and speed limits, as `curlq get`'s.
    @OptionGroup(title: "Transfer options") var transfer: TransferOptions

    func validate() throws {
        guard jobs >= 1 else { throw ValidationError("-j/--jobs must be at least 1, not \(jobs)") }
        guard perHost >= 0 else { throw ValidationError("--per-host must be 0 (no limit) or more, not \(perHost)") }
        guard drainTimeout.isFinite, drainTimeout >= 0 else { throw ValidationError("--drain-timeout must be 0 or more seconds") }
        try transfer.validate(jobs: jobs)
    }

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let options = try DaemonTransfer(transfer, environment: environment)
        if transfer.insecure {
            Output.error("curlq: warning: -k/--insecure: certificates are not checked; anyone on the network path can read and change these downloads\n")
        }
        let folder = URL(fileURLWithPath: directory).standardizedFileURL
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            throw UsageError("cannot create \(directory): \(error.localizedDescription)")
        }
        if let reason = FolderCheck.cannotWrite(into: folder.path) {
            throw UsageError("cannot write into the folder \(quoted(directory)): \(reason)")
        }
        let lines = DaemonLines(quiet: quiet, timestamps: !Terminal.isInteractive(STDOUT_FILENO))
        let (storeQueue, jobs, drainTimeout) = (storeOptions.queue, jobs, drainTimeout)
        let storeName = StoreURL(storeOptions.store).redact(storeOptions.store)
        // The metrics of `GET /metrics` (the RPC's, `--metrics-listen`'s): the factory must be in
        // place before the queue and the worker make their instruments.
        let metrics = rpcOptions.enabled || metricsOptions.address != nil ? MetricsExposition() : nil
        metrics?.bootstrap()
        try await storeOptions.withStore { store in
            let queue = RequestQueue(maxConcurrentRequestCount: jobs, name: storeQueue)
            queue.maxConcurrentRequestsPerHost = perHost
            var configuration = DurableWorker.Configuration(folder: folder)
            configuration.queue = storeQueue
            let settings = Aria2Settings(overallRate: options.overallRate, concurrent: jobs, queue: queue)
            configuration.prepareRequest = { request, job in
                options.apply(to: &request, job: job.spec.request)
                request.sharedReceiveLimit = settings.overallRate  // changeGlobalOption may change it
            }
            configuration.replacesExistingFiles = overwrite
            let worker = DurableWorker(store: store, requestQueue: queue, configuration: configuration)
            worker.register(kind: "download") { job in lines.ended(job) }
            let drain = Duration.milliseconds(Int64(drainTimeout * 1000))
            var sources: [any DispatchSourceSignal] = []
            for number in [SIGTERM, SIGINT] {
                signal(number, SIG_IGN)  // delivered to the dispatch source instead
                let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
                source.setEventHandler {
                    lines.stopping(signal: number, running: queue.operations.count, drain: drainTimeout)
                    worker.stop(drain: drain)
                }
                source.resume()
                sources.append(source)
            }
            lines.started(store: storeName, queue: storeQueue, folder: folder.path, jobs: jobs, drain: drainTimeout)
            var rpc: DaemonRPC?
            if rpcOptions.enabled {
                do {
                    rpc = try await DaemonRPC.start(rpcOptions, store: store, queue: storeQueue, folder: folder,
                                                    settings: settings, environment: environment, metrics: metrics,
                                                    progress: { worker.progress })
                } catch {
                    throw UsageError("cannot listen for the RPC on port \(rpcOptions.port): \(error)")
                }
                if let rpc { lines.rpc(url: rpc.url, listensOnAll: rpcOptions.listenAll) }
            }
            var metricsServer: RPCServer?
            if let address = metricsOptions.address, let metrics {
                do {
                    metricsServer = try await MetricsListener.start(
                        address, listensOnAll: metricsOptions.listenAll, metrics: metrics, store: store, queue: storeQueue)
                } catch {
                    throw UsageError("cannot listen for /metrics on \(metricsOptions.listen ?? ""): \(error)")
                }
                if let metricsServer {
                    let host = address.host.contains(":") ? "[\(address.host)]" : address.host
                    lines.metrics(url: "http://\(host):\(metricsServer.port)/metrics", listensOnAll: metricsOptions.listenAll)
                }
            }
            let watcher = exitWhenDone ? Task { await Self.stopWhenDone(worker, store: store, queue: storeQueue) } : nil
            defer { watcher?.cancel() }
            do {
                try await worker.run()
            } catch let error as PostgresStoreError {
                throw error  // the store's failure (exit 1), said by withStore
            } catch {
                throw UsageError("cannot start the worker: \(error)")
            }
            _ = sources
            await rpc?.stop()
            await metricsServer?.stop()
            let left = worker.jobsLeftLeased
            if !left.isEmpty {
                Output.error("curlq: the store could not be reached: job\(left.count == 1 ? "" : "s") \(left.map(String.init).joined(separator: ", ")) not recorded or given back; they stay leased and run again once the store rescues them\n")
            }
            lines.stopped()
        }
    }

    /// `--exit-when-done`: asks the store every quarter second (a poll: another daemon's jobs
    /// change it too, and SQLite has no notification across processes) and stops the worker
    /// once nothing of the queue is left to run; a store that cannot answer is asked again.
    static func stopWhenDone(_ worker: DurableWorker, store: any JobStore, queue: String) async {
        while !Task.isCancelled {
            if let counts = try? await store.counts(queue: queue),
               [.available, .scheduled, .running].allSatisfy({ (counts[$0] ?? 0) == 0 }) {
                worker.stop(drain: .zero)
                return
            }
            try? await Task.sleep(for: .milliseconds(250))  // the poll's period
        }
    }
}
