import ArgumentParser
import Foundation

/// `curlq daemon`'s JSON-RPC options, spelled as aria2c's.
struct RPCOptions: ParsableArguments {
    @Flag(name: .customLong("enable-rpc"), help: "Serve aria2's JSON-RPC at /jsonrpc (HTTP POST and WebSocket), on 127.0.0.1 unless --rpc-listen-all.")
    var enabled = false

    @Option(name: .customLong("rpc-listen-port"), help: ArgumentHelp("The RPC's port (0: any free one, printed at start).", valueName: "PORT"))
    var port: Int = 6800

    @Option(name: .customLong("rpc-secret"),
            help: ArgumentHelp("The RPC's secret: every call's first parameter must be token:SECRET (else CURLQ_RPC_SECRET).", valueName: "SECRET"))
    var secret: String?

    @Flag(name: .customLong("rpc-listen-all"), help: "Listen on every address, not only loopback (needs a secret).")
    var listenAll = false

    @Flag(name: .customLong("rpc-allow-origin-all"), help: "Let web pages of any origin call the RPC (adds Access-Control-Allow-Origin: *).")
    var allowOriginAll = false

    @Flag(name: .customLong("rpc-secure"), help: "TLS for the RPC: not supported yet (refused).")
    var secure = false

    @Option(name: .customLong("rpc-certificate"), help: ArgumentHelp("With --rpc-secure: not supported yet (refused).", valueName: "FILE"))
    var certificate: String?

    @Option(name: .customLong("rpc-private-key"), help: ArgumentHelp("With --rpc-secure: not supported yet (refused).", valueName: "FILE"))
    var privateKey: String?

    /// The secret from the option, else from `CURLQ_RPC_SECRET` (kept out of `ps`).
    func resolvedSecret(_ environment: [String: String]) -> String? {
        if let secret, !secret.isEmpty { return secret }
        if let value = environment["CURLQ_RPC_SECRET"], !value.isEmpty { return value }
        return nil
    }

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--rpc-listen-port must be 0 to 65535, not \(port)") }
        if secure || certificate != nil || privateKey != nil {
            throw ValidationError("--rpc-secure, --rpc-certificate and --rpc-private-key are not supported yet: "
                + "put a TLS proxy in front of a loopback RPC (docs/daemon.md)")
        }
        if listenAll, resolvedSecret(ProcessInfo.processInfo.environment) == nil {
            throw ValidationError("--rpc-listen-all needs --rpc-secret (or CURLQ_RPC_SECRET): "
                + "the RPC starts downloads that write files, and every address could reach it")
        }
        if !enabled, listenAll || allowOriginAll || secret != nil || port != 6800 {
            throw ValidationError("the --rpc-* options need --enable-rpc")
        }
    }
}
