import Foundation
import NIOHTTP1

/// Who may talk to the daemon's HTTP server, checked on every request before any route runs
/// (and before a WebSocket upgrade): a defence against DNS rebinding and cross-site requests
/// from a browser, on top of the RPC secret.
struct RPCAccess: Sendable {
    /// Listening on every address (`--rpc-listen-all`): any `Host` is taken (a secret is then
    /// required at start). Else only a loopback name or address.
    var listensOnAll: Bool
    /// `--rpc-allow-origin-all`: a browser page of any origin may call (aria2's option; it also
    /// adds `Access-Control-Allow-Origin: *`). Else only the server's own origin.
    var allowsAnyOrigin: Bool

    /// Why `headers` are refused (a 403's words), or nil when they pass.
    func refusal(_ headers: HTTPHeaders) -> String? {
        let hosts = headers["Host"]
        guard hosts.count == 1, let host = hosts.first, !host.isEmpty else { return "one Host header is required" }
        if !listensOnAll, !Self.isLoopback(host: host) {
            return "Host \(host) is not a loopback name: the server listens on loopback only (DNS rebinding)"
        }
        let origins = headers["Origin"]
        guard let origin = origins.first else { return nil }  // not from a browser page
        if origins.count > 1 { return "more than one Origin header" }
        if allowsAnyOrigin { return nil }
        if origin.lowercased() == "http://" + host.lowercased() { return nil }
        return "Origin \(origin) is not this server's (http://\(host)); a page of another origin needs --rpc-allow-origin-all"
    }

    /// `localhost`, `127.x.y.z` or `[::1]`, with or without a port.
    static func isLoopback(host: String) -> Bool {
        var name = host.lowercased()
        if name.hasPrefix("[") {
            guard let close = name.firstIndex(of: "]") else { return false }
            let rest = name[name.index(after: close)...]
            guard rest.isEmpty || Self.isPort(rest.dropFirst()) && rest.first == ":" else { return false }
            return name[name.index(after: name.startIndex)..<close] == "::1"
        }
        if let colon = name.lastIndex(of: ":") {
            guard Self.isPort(name[name.index(after: colon)...]) else { return false }
            name = String(name[..<colon])
        }
        if name == "localhost" || name == "localhost." { return true }
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127"
            && parts.allSatisfy { !$0.isEmpty && $0.count <= 3 && $0.allSatisfy(\.isASCII) && UInt8($0) != nil }
    }

    private static func isPort(_ text: Substring) -> Bool {
        !text.isEmpty && text.count <= 5 && text.allSatisfy { $0.isASCII && $0.isNumber }
    }
}

/// Compares secrets in time that depends only on their lengths, not on where they differ.
enum ConstantTime {
    static func equal(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        var difference = UInt8(x.count == y.count ? 0 : 1)
        // Every byte of the given one is compared, against the secret's bytes repeated.
        guard !y.isEmpty else { return x.isEmpty }
        for index in x.indices { difference |= x[index] ^ y[index % y.count] }
        return difference == 0
    }
}
