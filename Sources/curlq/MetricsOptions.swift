import ArgumentParser

/// `curlq daemon`'s Prometheus listener: `GET /metrics` on an address of its own, without the
/// RPC (docs/daemon.md). Loopback unless `--metrics-listen-all` says otherwise, as the RPC's
/// `--rpc-listen-all` does.
struct MetricsOptions: ParsableArguments {
    @Option(name: .customLong("metrics-listen"),
            help: ArgumentHelp("Serve Prometheus' text at /metrics on [HOST:]PORT, without the RPC: HOST 127.0.0.1 unless given, "
                + "and a loopback address unless --metrics-listen-all; PORT 0: any free one, printed at start.",
                valueName: "[HOST:]PORT"))
    var listen: String?

    @Flag(name: .customLong("metrics-listen-all"),
          help: "Let --metrics-listen take a HOST that is not loopback (0.0.0.0: every address): whoever reaches it reads the queue's figures.")
    var listenAll = false

    /// Where to listen: `host` as NIO binds it (an IPv6 address without brackets).
    struct Address: Equatable {
        var host: String
        var port: Int
    }

    /// The address `text` names, nil when it is not `PORT`, `HOST:PORT` or `[IPv6]:PORT`.
    static func address(_ text: String) -> Address? {
        func port(_ digits: Substring) -> Int? {
            guard !digits.isEmpty, digits.count <= 5, digits.allSatisfy({ $0.isASCII && $0.isNumber }),
                  let port = Int(digits), port <= 65535 else { return nil }
            return port
        }
        if let only = port(Substring(text)) { return Address(host: "127.0.0.1", port: only) }
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].first == ":",
                  let number = port(text[text.index(close, offsetBy: 2)...]) else { return nil }
            let host = text[text.index(after: text.startIndex)..<close]
            return host.isEmpty ? nil : Address(host: String(host), port: number)
        }
        guard let colon = text.lastIndex(of: ":"), let number = port(text[text.index(after: colon)...]) else { return nil }
        let host = text[..<colon]
        guard !host.isEmpty, !host.contains(":") else { return nil }
        return Address(host: String(host), port: number)
    }

    /// The address of `--metrics-listen`, nil without it (checked by ``validate()``).
    var address: Address? { listen.flatMap(Self.address) }

    func validate() throws {
        guard let listen else {
            if listenAll { throw ValidationError("--metrics-listen-all needs --metrics-listen") }
            return
        }
        guard let address = Self.address(listen) else {
            throw ValidationError("--metrics-listen takes PORT or HOST:PORT ([::1]:PORT for IPv6), not \(listen)")
        }
        // The RPC's own test of a loopback name (which takes IPv6 in brackets).
        let named = address.host.contains(":") ? "[\(address.host)]" : address.host
        if !listenAll, !RPCAccess.isLoopback(host: named) {
            throw ValidationError("--metrics-listen \(listen) is not a loopback address: add --metrics-listen-all to serve "
                + "the queue's figures to every host that can reach it")
        }
    }
}
