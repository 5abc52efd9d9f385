import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The same call sequence against a real `aria2c --enable-rpc` (Debian's aria2; scripts/setup
/// installs it) and `curlq daemon --enable-rpc`, each on its own loopback port, downloading from
/// the same fixture server: the answers' keys, types and meaning are compared. Every
/// difference that is deliberate is in docs/daemon.md and named here.
///
/// With CURLQ_RPC_DIFF_TABLE=FILE the test writes the method × aria2c × curlq table there.
@Suite struct RPCDifferentialTests {
    static let secret = "diff-s3cret"

    /// One side's RPC endpoint.
    struct Side {
        var name: String
        var port: Int
        /// `params`: the parameters after the token, comma-separated, without the outer brackets.
        func call(_ method: String, _ params: String = "") async throws -> (status: Int, reply: [String: Any]) {
            let all = #"["token:\#(RPCDifferentialTests.secret)"\#(params.isEmpty ? "" : "," + params)]"#
            let response = try await rpcPost(port: port, #"{"jsonrpc":"2.0","id":"q","method":"\#(method)","params":\#(all)}"#)
            return (response.status, try response.json())
        }
        func raw(_ body: String) async throws -> (status: Int, reply: [String: Any]) {
            let response = try await rpcPost(port: port, body)
            return (response.status, try response.json())
        }
    }

    /// What a JSON value is, for comparing types: string, number, bool, array, object, null.
    static func type(_ value: Any?) -> String {
        switch value {
        case nil, is NSNull: "null"
        case is String: "string"
        case is NSNumber: "number"  // aria2 answers no booleans: its flags are strings
        case is [Any]: "array"
        case is [String: Any]: "object"
        default: "?"
        }
    }

    /// The shape of an answer: its keys with their types, one level into objects and arrays of objects.
    static func shape(_ value: Any?) -> [String: String] {
        guard let object = value as? [String: Any] else { return ["": type(value)] }
        var shape: [String: String] = [:]
        for (key, member) in object {
            shape[key] = type(member)
            if let items = member as? [[String: Any]], let first = items.first {
                for (inner, value) in first { shape[key + "[]." + inner] = type(value) }
            }
        }
        return shape
    }

    @Test func curlqAnswersAsAria2cDoes() async throws {
        let aria2c = "/usr/bin/aria2c"
        try #require(FileManager.default.isExecutableFile(atPath: aria2c), "aria2c is missing: scripts/setup installs Debian's aria2")
        try await withServer { server in
            try await withFolder { folder in
                // aria2c binds IPv4 only, so that a taken port makes it exit instead of listening
                // on ::1 alone, and it is aria2c only once its own getVersion answers with this
                // secret; else another port is tried.
                var started: (process: Process, port: Int)?
                for _ in 0..<5 where started == nil {
                    // Below the kernel's ephemeral range (32768 and up), where the suite's
                    // servers bind port 0: a port found free by binding one was, under load,
                    // still held or taken again when aria2c bound it.
                    let port = Int.random(in: 20_000..<32_000)
                    let aria = Process()
                    aria.executableURL = URL(fileURLWithPath: aria2c)
                    aria.arguments = ["--enable-rpc", "--rpc-listen-port", String(port), "--rpc-secret", Self.secret, "--no-conf",
                                      "--quiet", "-d", folder.appendingPathComponent("aria").path, "--max-tries", "1",
                                      "--auto-file-renaming=false", "--daemon=false", "--disable-ipv6=true"]
                    aria.standardOutput = FileHandle.nullDevice
                    aria.standardError = FileHandle.nullDevice
                    try aria.run()
                    let answers = try await pollStore {
                        guard aria.isRunning else { return true }
                        let reply = try? await rpcPost(port: port, #"{"jsonrpc":"2.0","id":"v","method":"aria2.getVersion","params":["token:\#(Self.secret)"]}"#)
                        return ((try? reply?.json())?["result"] as? [String: Any])?["enabledFeatures"] != nil
                    }
                    if answers && aria.isRunning {
                        started = (aria, port)
                    } else {
                        // SIGKILL: the test process's children inherit its blocked SIGTERM.
                        kill(aria.processIdentifier, SIGKILL)
                        aria.waitUntilExit()
                    }
                }
                let (aria, ariaPort) = try #require(started, "aria2c did not answer on a port of its own in five tries")
                // SIGKILL: the test process's children inherit its blocked SIGTERM, which aria2c
                // never unblocks (seen: aria2c processes left running after terminate()).
                defer {
                    kill(aria.processIdentifier, SIGKILL)
                    aria.waitUntilExit()
                }
                let store = "sqlite:" + folder.appendingPathComponent("jobs.db").path
                let daemon = try RPCDaemonProcess(store: store, folder: folder.appendingPathComponent("curlq"),
                                                  arguments: ["--rpc-secret", Self.secret])
                let sides = [Side(name: "aria2c", port: ariaPort), Side(name: "curlq", port: daemon.port)]
                var table: [(String, String, String)] = []
                func row(_ method: String, _ answers: [String]) { table.append((method, answers[0], answers[1])) }

                // getVersion: the same keys and types.
                var answers: [[String: Any]] = []
                for side in sides { answers.append(try await side.call("aria2.getVersion").reply) }
                #expect(Self.shape(answers[0]["result"]) == Self.shape(answers[1]["result"]))
                row("aria2.getVersion", ["version, enabledFeatures", "same keys and types (curlq's own version)"])

                // addUri of a good file and of a 404, then tellStatus until each has stopped.
                let good = server.url("/bytes/5000").absoluteString
                let gone = server.url("/status/404").absoluteString
                var gids: [[String]] = []
                for side in sides {
                    var mine: [String] = []
                    for (url, out) in [(good, "d.bin"), (gone, "g.bin")] {
                        let answer = try await side.call("aria2.addUri", #"["\#(url)"],{"out":"\#(out)","split":"2","max-download-limit":"0"}"#)
                        let gid = try #require(answer.reply["result"] as? String, "\(side.name): \(answer)")
                        #expect(gid.count == 16 && gid.allSatisfy(\.isHexDigit))
                        mine.append(gid)
                    }
                    gids.append(mine)
                }
                row("aria2.addUri", ["GID (random)", "GID (the job id, 16 hex digits)"])
                var statuses: [[[String: Any]]] = [[], []]
                for (index, side) in sides.enumerated() {
                    for gid in gids[index] {
                        var status: [String: Any] = [:]
                        let stopped = try await pollStore {
                            status = try await side.call("aria2.tellStatus", #""\#(gid)""#).reply["result"] as? [String: Any] ?? [:]
                            return ["complete", "error"].contains(status["status"] as? String ?? "")
                        }
                        #expect(stopped, "\(side.name): \(status)")
                        statuses[index].append(status)
                    }
                }
                for file in 0..<2 {
                    let (a, c) = (statuses[0][file], statuses[1][file])
                    let ariaShape = Self.shape(a), curlqShape = Self.shape(c)
                    for (key, type) in curlqShape {
                        #expect(ariaShape[key] == nil || ariaShape[key] == type, "\(key): aria2c \(ariaShape[key] ?? "-"), curlq \(type)")
                    }
                    // Keys aria2c gives for an HTTP download that curlq does not: none but these.
                    let missing = Set(ariaShape.keys).subtracting(curlqShape.keys).subtracting(["bitfield", "verifiedLength", "verifyIntegrityPending"])
                    #expect(missing.isEmpty, "keys aria2c has and curlq lacks: \(missing.sorted())")
                    for key in ["status", "totalLength", "completedLength", "errorCode", "uploadLength", "connections"] {
                        #expect(a[key] as? String == c[key] as? String, "\(key): aria2c \(a[key] ?? "-"), curlq \(c[key] ?? "-")")
                    }
                    let aFile = (a["files"] as? [[String: Any]])?.first, cFile = (c["files"] as? [[String: Any]])?.first
                    #expect((aFile?["path"] as? String)?.split(separator: "/").last == (cFile?["path"] as? String)?.split(separator: "/").last)
                    let aURI = (aFile?["uris"] as? [[String: Any]])?.first?["uri"] as? String
                    let cURI = (cFile?["uris"] as? [[String: Any]])?.first?["uri"] as? String
                    #expect(aURI == cURI)
                }
                row("aria2.tellStatus", ["status complete/error, lengths, errorCode 0 / 3 (404)", "the same values; no bitfield"])

                // Key filters, lists, stats, options: the same shapes.
                for (method, params) in [("aria2.tellStatus", #""GID",["gid","status","totalLength"]"#),
                                         ("aria2.tellStopped", #"0,10,["gid","status","errorCode"]"#),
                                         ("aria2.tellWaiting", "0,10"), ("aria2.tellActive", "[\"gid\"]"),
                                         ("aria2.getGlobalStat", ""), ("aria2.getUris", #""GID""#), ("aria2.getFiles", #""GID""#),
                                         ("aria2.pauseAll", ""), ("aria2.unpauseAll", ""),
                                         ("aria2.changeGlobalOption", #"{"max-overall-download-limit":"1M"}"#)] {
                    var results: [Any?] = []
                    var errors: [String?] = []
                    for (index, side) in sides.enumerated() {
                        let reply = try await side.call(method, params.replacingOccurrences(of: "GID", with: gids[index][0])).reply
                        results.append(reply["result"])
                        errors.append((reply["error"] as? [String: Any])?["message"] as? String)
                    }
                    if method == "aria2.getUris", let error = errors[0] {
                        // aria2c drops a finished download's URIs; curlq still has the job's one.
                        #expect(results[1] is [[String: Any]], "\(method): curlq \(results[1] ?? "-")")
                        row(method, ["error " + error.replacingOccurrences(of: gids[0][0], with: "GID"), Self.describe(results[1])])
                        continue
                    }
                    #expect(results[0] != nil && results[1] != nil, "\(method): aria2c \(errors[0] ?? "-"), curlq \(errors[1] ?? "-")")
                    if let a = results[0] as? [[String: Any]], let c = results[1] as? [[String: Any]] {
                        #expect(a.count == c.count && zip(a, c).allSatisfy { Self.shape($0) == Self.shape($1) },
                                "\(method): aria2c \(a), curlq \(c)")
                        if method == "aria2.tellStopped" {  // in the order they stopped, which may differ: compared as sets
                            #expect(Set(a.map { "\($0["status"] ?? "") \($0["errorCode"] ?? "")" })
                                == Set(c.map { "\($0["status"] ?? "") \($0["errorCode"] ?? "")" }), "aria2c \(a), curlq \(c)")
                        }
                    } else if results[0] is [String: Any] {
                        #expect(Self.shape(results[0]) == Self.shape(results[1]), "\(method): aria2c \(results[0] ?? "-"), curlq \(results[1] ?? "-")")
                    } else {
                        #expect(results[0] as? String == results[1] as? String, "\(method): aria2c \(results[0] ?? "-"), curlq \(results[1] ?? "-")")
                    }
                    row(method, [Self.describe(results[0]), Self.describe(results[0]) == Self.describe(results[1]) ? "same" : Self.describe(results[1])])
                }
                var globals: [String] = []
                for side in sides {
                    globals.append((try await side.call("aria2.getGlobalOption").reply["result"] as? [String: Any])?["max-overall-download-limit"] as? String ?? "")
                }
                #expect(globals == ["1048576", "1048576"], "\(globals)")
                row("aria2.getGlobalOption", ["every aria2c option (max-overall-download-limit 1048576)", "curlq's few (the same value)"])

                // Errors: the same code, message and HTTP status.
                let errors: [(String, String)] = [
                    ("tellStatus, a malformed GID", #"{"jsonrpc":"2.0","id":1,"method":"aria2.tellStatus","params":["token:\#(Self.secret)","zz"]}"#),
                    ("tellStatus, an unknown GID", #"{"jsonrpc":"2.0","id":1,"method":"aria2.tellStatus","params":["token:\#(Self.secret)","00000000000000ff"]}"#),
                    ("an unknown method", #"{"jsonrpc":"2.0","id":1,"method":"aria2.nope","params":["token:\#(Self.secret)"]}"#),
                    ("a wrong token", #"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion","params":["token:nope"]}"#),
                    ("no token", #"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion","params":[]}"#),
                    ("not JSON", "{nope"),
                    ("no id", #"{"jsonrpc":"2.0","method":"aria2.getVersion","params":["token:\#(Self.secret)"]}"#),
                    ("params not an array", #"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion","params":{"a":1}}"#),
                    ("addUri, URIs not an array", #"{"jsonrpc":"2.0","id":1,"method":"aria2.addUri","params":["token:\#(Self.secret)","http://127.0.0.1/x"]}"#),
                    ("addUri, a bad split", #"{"jsonrpc":"2.0","id":1,"method":"aria2.addUri","params":["token:\#(Self.secret)",["http://127.0.0.1/x"],{"split":"x"}]}"#),
                ]
                for (name, body) in errors {
                    var got: [(Int, [String: Any])] = []
                    for side in sides {
                        let answer = try await side.raw(body)
                        got.append((answer.status, answer.reply["error"] as? [String: Any] ?? [:]))
                    }
                    #expect(got[0].0 == got[1].0, "\(name): HTTP \(got[0].0) / \(got[1].0)")
                    #expect(got[0].1["code"] as? Int == got[1].1["code"] as? Int, "\(name): \(got[0].1) / \(got[1].1)")
                    #expect(got[0].1["message"] as? String == got[1].1["message"] as? String, "\(name): \(got[0].1) / \(got[1].1)")
                    row("error: " + name, ["\(got[0].0) \(got[0].1["code"] ?? "-") \(got[0].1["message"] ?? "-")",
                                           got[0].1["message"] as? String == got[1].1["message"] as? String && got[0].0 == got[1].0 ? "same" : "\(got[1].0) \(got[1].1["message"] ?? "-")"])
                }
                // remove of a finished download: the same refusal, naming the GID.
                var removes: [String] = []
                for (index, side) in sides.enumerated() {
                    let message = (try await side.call("aria2.remove", #""\#(gids[index][0])""#).reply["error"] as? [String: Any])?["message"] as? String
                    removes.append(message?.replacingOccurrences(of: gids[index][0], with: "GID") ?? "")
                }
                #expect(removes[0] == removes[1] && removes[0] == "Active Download not found for GID#GID", "\(removes)")
                row("aria2.remove (finished)", [removes[0], removes[0] == removes[1] ? "same" : removes[1]])

                // multicall: results wrapped in arrays, errors as objects.
                var multis: [[Any]] = []
                for side in sides {
                    let body = #"{"jsonrpc":"2.0","id":1,"method":"system.multicall","params":[[{"methodName":"aria2.getGlobalStat","params":["token:\#(Self.secret)"]},{"methodName":"aria2.nope","params":["token:\#(Self.secret)"]}]]}"#
                    multis.append(try await side.raw(body).reply["result"] as? [Any] ?? [])
                }
                #expect(multis.map { $0.map(Self.type) } == [["array", "object"], ["array", "object"]], "\(multis)")
                row("system.multicall", ["[[result], {code, message}]", "same"])

                let aMethods = Set(try await sides[0].raw(#"{"jsonrpc":"2.0","id":1,"method":"system.listMethods"}"#).reply["result"] as? [String] ?? [])
                let cMethods = Set(try await sides[1].raw(#"{"jsonrpc":"2.0","id":1,"method":"system.listMethods"}"#).reply["result"] as? [String] ?? [])
                #expect(cMethods.isSubset(of: aMethods), "curlq lists methods aria2c has not: \(cMethods.subtracting(aMethods))")
                row("system.listMethods", ["\(aMethods.count) methods", "\(cMethods.count), all aria2c's (no torrent, metalink, changeUri, getPeers, getServers, shutdown, saveSession)"])

                // What curlq refuses (deliberate, docs/daemon.md), where aria2c acts; then the
                // download results removed, as aria2c removes them.
                for (method, params) in [("aria2.pause", #""GID""#), ("aria2.changePosition", #""GID",0,"POS_SET""#),
                                         ("aria2.removeDownloadResult", #""GID""#), ("aria2.purgeDownloadResult", ""),
                                         ("aria2.tellStatus", #""GID""#)] {
                    var outcomes: [String] = []
                    for (index, side) in sides.enumerated() {
                        let reply = try await side.call(method, params.replacingOccurrences(of: "GID", with: gids[index][1])).reply
                        let outcome = reply["result"].map { "result \(Self.describe($0))" } ?? "error \((reply["error"] as? [String: Any])?["message"] as? String ?? "")"
                        outcomes.append(outcome.replacingOccurrences(of: gids[index][1], with: "GID"))
                    }
                    if method == "aria2.pause" || method == "aria2.changePosition" {
                        #expect(outcomes[1].hasPrefix("error "), "\(method): curlq \(outcomes[1])")
                    } else {
                        #expect(outcomes[0] == outcomes[1], "\(method): aria2c \(outcomes[0]), curlq \(outcomes[1])")
                    }
                    row(method, outcomes)
                }
                if let path = ProcessInfo.processInfo.environment["CURLQ_RPC_DIFF_TABLE"] {
                    let text = "| Call | aria2c 1.36 | curlq daemon |\n|---|---|---|\n"
                        + table.map { "| \($0.0) | \($0.1.replacingOccurrences(of: "|", with: "/")) | \($0.2.replacingOccurrences(of: "|", with: "/")) |" }.joined(separator: "\n") + "\n"
                    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
                }
                #expect(try await daemon.stop() == 0)
            }
        }
    }

    static func describe(_ value: Any?) -> String {
        switch value {
        case let text as String: return text
        case let items as [Any]: return "\(items.count) item\(items.count == 1 ? "" : "s")"
        case let object as [String: Any]: return "{" + object.keys.sorted().joined(separator: ", ") + "}"
        default: return String(describing: value ?? "null")
        }
    }
}
