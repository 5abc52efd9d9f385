public import Foundation

/// nginx (Debian's package) serving HTTPS with HTTP/2 on 127.0.0.1, with a certificate made on
/// the spot by a throw-away CA, for tests of TLS trust and HTTP/2 multiplexing.
///
/// Files: `/files/1k` (1,024 bytes) and `/files/1m` (1,048,576 bytes) of
/// ``FixtureServer/expectedBytes(offset:count:)``; `/status` is nginx's stub_status.
/// Needs `nginx` and `openssl` on the PATH (scripts/setup installs them).
///
/// Besides the valid certificate (``port``), nginx serves the same files on one port per
/// ``Certificate`` flaw (``url(_:certificate:)``), all with the same key (so ``publicKeyPin``
/// matches each of them).
public final class NginxServer: Sendable {
    /// The certificate a port presents.
    public enum Certificate: String, Sendable, CaseIterable {
        /// Signed by the CA in ``caFile``, for `localhost` and `127.0.0.1`, valid now.
        case valid
        /// Signed by the CA, valid now, but only for `wrong.invalid`.
        case wrongName
        /// Signed by the CA, for `localhost` and `127.0.0.1`, valid only on 1 January 2020.
        case expired
        /// Signed by its own key (no CA), for `localhost` and `127.0.0.1`, valid now.
        case selfSigned
    }

    /// The HTTPS port.
    public let port: Int
    /// The port of each certificate (``Certificate/valid`` is ``port``).
    public let ports: [Certificate: Int]
    /// The PEM file of the CA that signed the server's certificate (for `TLSOptions.caFile`).
    public let caFile: String
    /// The server key's pin, `sha256//<base64>` (for `TLSOptions.pinnedPublicKey`).
    public let publicKeyPin: String
    private let folder: URL
    private let process: Process

    private init(ports: [Certificate: Int], caFile: String, publicKeyPin: String, folder: URL, process: Process) {
        self.port = ports[.valid]!
        self.ports = ports
        self.caFile = caFile
        self.publicKeyPin = publicKeyPin
        self.folder = folder
        self.process = process
    }

    /// `https://127.0.0.1:PORT` followed by `path`, on the port that presents `certificate`.
    public func url(_ path: String, certificate: Certificate = .valid) -> URL {
        URL(string: "https://127.0.0.1:\(ports[certificate]!)\(path)")!
    }

    /// Makes the certificates and the files, starts nginx, and returns once it accepts connections.
    public static func start() async throws -> NginxServer {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("curlqueue-nginx-\(UUID().uuidString)")
        let files = folder.appendingPathComponent("files")
        try FileManager.default.createDirectory(at: files, withIntermediateDirectories: true)
        try Data(FixtureServer.expectedBytes(count: 1024)).write(to: files.appendingPathComponent("1k"))
        try Data(FixtureServer.expectedBytes(count: 1 << 20)).write(to: files.appendingPathComponent("1m"))

        let path = folder.path
        _ = try await blocking { try run("/bin/sh", ["-c", """
            set -e; cd '\(path)'
            openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj '/CN=CurlQueue Test CA' 2>/dev/null
            openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj '/CN=localhost' 2>/dev/null
            printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > san.ext
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile san.ext 2>/dev/null
            printf 'subjectAltName=DNS:wrong.invalid\\n' > wrong.ext
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out wrongName.pem -days 2 -extfile wrong.ext 2>/dev/null
            openssl req -x509 -key server.key -out selfSigned.pem -days 2 -subj '/CN=localhost' -addext 'subjectAltName=DNS:localhost,IP:127.0.0.1' 2>/dev/null
            # Expired: `openssl ca` sets both dates (OpenSSL 3.0's x509 -req cannot).
            mkdir ca-db; : > ca-db/index.txt; echo 1000 > ca-db/serial
            printf '[ca]\\ndefault_ca=test\\n[test]\\ndatabase=ca-db/index.txt\\nnew_certs_dir=ca-db\\nserial=ca-db/serial\\ndefault_md=sha256\\npolicy=any\\n[any]\\ncommonName=supplied\\n[leaf]\\nsubjectAltName=DNS:localhost,IP:127.0.0.1\\n' > ca.cnf
            openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -in server.csr -out expired.pem -startdate 20200101000000Z -enddate 20200102000000Z -extensions leaf -notext 2>/dev/null
            cp server.pem valid.pem
            openssl pkey -in server.key -pubout -outform der | openssl dgst -sha256 -binary | openssl base64 > pin.txt
            """]) }
        let pin = try String(contentsOf: folder.appendingPathComponent("pin.txt"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)

        // The port is found free and then handed to nginx; another server may take it in
        // between, so a bind failure is tried again on another port.
        var lastError: any Error = NginxError.failedToStart("no attempt")
        for _ in 0..<5 {
            var ports: [Certificate: Int] = [:]
            for certificate in Certificate.allCases {
                ports[certificate] = try await freePort()
            }
            guard Set(ports.values).count == ports.count else { continue }
            let port = ports[.valid]!
            try? FileManager.default.removeItem(at: folder.appendingPathComponent("error.log"))
            try configuration(ports: ports, path: path).write(to: folder.appendingPathComponent("nginx.conf"), atomically: true, encoding: .utf8)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: try which("nginx"))
            process.arguments = ["-p", path, "-c", "\(path)/nginx.conf", "-e", "\(path)/error.log"]
            process.standardInput = FileHandle.nullDevice
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            do {
                try await waitUntilListening(process, port: port, folder: folder)
                return NginxServer(ports: ports, caFile: "\(path)/ca.pem", publicKeyPin: "sha256//\(pin)", folder: folder, process: process)
            } catch {
                stop(process)
                lastError = error
            }
        }
        try? FileManager.default.removeItem(at: folder)
        throw lastError
    }

    private static func configuration(ports: [Certificate: Int], path: String) -> String {
        let servers = Certificate.allCases.map { certificate in
            """
                    server {
                        listen 127.0.0.1:\(ports[certificate]!) ssl http2;
                        ssl_certificate \(path)/\(certificate.rawValue).pem; ssl_certificate_key \(path)/server.key;
                        http2_max_concurrent_streams 256;
                        keepalive_requests 100000;
                        location /files/ { root \(path); }
                        location = /status { stub_status; }
                    }
            """
        }
        return """
            daemon off; master_process off; worker_processes 1;
            pid \(path)/nginx.pid; error_log \(path)/error.log warn;
            events { worker_connections 4096; }
            http {
                access_log off;
                client_body_temp_path \(path)/tmp-body; proxy_temp_path \(path)/tmp-proxy;
                fastcgi_temp_path \(path)/tmp-fcgi; uwsgi_temp_path \(path)/tmp-uwsgi; scgi_temp_path \(path)/tmp-scgi;
            \(servers.joined(separator: "\n"))
            }
            """
    }

    /// Connections nginx accepted so far on all its ports (stub_status "accepts"; the status
    /// request's own connection included when it needed a new one). A TLS handshake that fails
    /// still counts: it is one accepted connection.
    public func acceptedConnections() throws -> Int {
        let text = try Self.output("/usr/bin/curl", ["-s", "--max-time", "10", "--cacert", caFile, url("/status").absoluteString])
        // Active connections: 1 \n server accepts handled requests \n A H R \n ...
        let lines = text.split(separator: "\n")
        guard lines.count >= 3, let accepts = lines[2].split(separator: " ").first.flatMap({ Int($0) }) else {
            throw NginxError.unexpected(text)
        }
        return accepts
    }

    /// ``acceptedConnections()`` from a thread of its own, so that its wait for `curl` does not
    /// hold one of Swift concurrency's few threads.
    public func acceptedConnectionCount() async throws -> Int {
        try await Self.blocking { try self.acceptedConnections() }
    }

    /// Stops nginx and removes its folder.
    public func shutdown() {
        Self.stop(process)
        try? FileManager.default.removeItem(at: folder)
    }

    private static func stop(_ process: Process) {
        if process.isRunning {
            // SIGKILL: a child spawned from a Dispatch worker thread inherits that thread's
            // blocked signals, SIGTERM among them.
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    deinit { shutdown() }

    private static func waitUntilListening(_ process: Process, port: Int, folder: URL) async throws {
        let caFile = folder.appendingPathComponent("ca.pem").path
        let status = "https://127.0.0.1:\(port)/status"
        for _ in 0..<200 {
            if !process.isRunning {
                let log = (try? String(contentsOf: folder.appendingPathComponent("error.log"), encoding: .utf8)) ?? ""
                throw NginxError.failedToStart(log)
            }
            if (try? await blocking({ try output("/usr/bin/curl", ["-s", "--max-time", "10", "-o", "/dev/null", "--cacert", caFile, status]) })) != nil {
                return
            }
            try await Task.sleep(for: .milliseconds(25))  // a readiness probe: nginx gives no other signal
        }
        throw NginxError.failedToStart("not listening after 5 s")
    }

    private static func freePort() async throws -> Int {
        let probe = try await FixtureServer.start()
        let port = probe.port
        try await probe.shutdown()
        return port
    }

    private static func which(_ name: String) throws -> String {
        for directory in ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"] {
            let candidate = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw NginxError.failedToStart("\(name) is not installed (scripts/setup installs it)")
    }

    /// Runs blocking work (child processes) on a thread of its own, so that it never holds one of
    /// Swift concurrency's few threads.
    private static func blocking<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try work() }) }.start()
        }
    }

    @discardableResult
    private static func run(_ executable: String, _ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw NginxError.failedToStart("\(executable) \(arguments) failed") }
        return process.terminationStatus
    }

    private static func output(_ executable: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw NginxError.unexpected("curl exited \(process.terminationStatus)") }
        return String(decoding: data, as: UTF8.self)
    }
}

/// Why ``NginxServer`` could not be used.
public enum NginxError: Error, Sendable, CustomStringConvertible {
    case failedToStart(String)
    case unexpected(String)

    public var description: String {
        switch self {
        case .failedToStart(let detail): return "nginx did not start: \(detail)"
        case .unexpected(let detail): return "unexpected nginx answer: \(detail)"
        }
    }
}
