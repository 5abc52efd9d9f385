import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing
@testable import curlq

/// The RPC secret: aria2's `token:SECRET` first parameter, compared in constant time, required
/// to listen beyond loopback, and never in an answer or a line the daemon prints.
@Suite struct RPCSecretTests {
    static let secret = "s3cr3t-RPC-token"

    @Test func aCallWithoutTheRightTokenIsUnauthorizedAndChangesNothing() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let store = "sqlite:" + folder.appendingPathComponent("jobs.db").path
                let daemon = try RPCDaemonProcess(store: store, folder: folder.appendingPathComponent("files"),
                                                  arguments: ["--rpc-secret", Self.secret])
                let url = server.url("/bytes/10").absoluteString
                for token in [nil, "token:wrong", "token:" + Self.secret.dropLast(), "token:" + Self.secret + "x", Self.secret] {
                    let params = (token.map { #""\#($0)","# } ?? "") + #"["\#(url)"]"#
                    let response = try await rpcPost(port: daemon.port, #"{"jsonrpc":"2.0","id":7,"method":"aria2.addUri","params":[\#(params)]}"#)
                    #expect(response.status == 400, "\(response)")
                    let error = try #require(try response.json()["error"] as? [String: Any])
                    #expect(error["code"] as? Int == 1 && error["message"] as? String == "Unauthorized", "\(token ?? "none"): \(response)")
                    #expect(!response.body.contains(Self.secret))
                }
                let counts = try #require(try await rpcResult(port: daemon.port, "aria2.getGlobalStat", #"["token:\#(Self.secret)"]"#) as? [String: Any])
                #expect(counts["numWaiting"] as? String == "0" && counts["numActive"] as? String == "0" && counts["numStopped"] as? String == "0",
                        "nothing was added: \(counts)")
                // system.listMethods needs no token (aria2's rule); a multicall's calls each do.
                #expect((try await rpcResult(port: daemon.port, "system.listMethods") as? [String])?.contains("aria2.addUri") == true)
                let multi = try #require(try await rpcResult(
                    port: daemon.port, "system.multicall",
                    #"[[{"methodName":"aria2.getVersion","params":["token:\#(Self.secret)"]},{"methodName":"aria2.getVersion","params":[]}]]"#) as? [Any])
                #expect(multi.count == 2 && multi[0] is [Any] && (multi[1] as? [String: Any])?["message"] as? String == "Unauthorized", "\(multi)")
                #expect(try await daemon.stop() == 0)
                #expect(!daemon.printed.contains(Self.secret), "\(daemon.printed)")
            }
        }
    }

    @Test func listeningOnEveryAddressWithoutASecretIsRefused() async throws {
        try await withFolder { folder in
            let process = Process()
            process.executableURL = builtProduct("curlq")
            process.arguments = ["daemon", "--store", "sqlite:" + folder.appendingPathComponent("jobs.db").path, "-d", folder.path,
                                 "--enable-rpc", "--rpc-listen-all", "--rpc-listen-port", "0"]
            var environment = ProcessInfo.processInfo.environment
            environment["CURLQ_RPC_SECRET"] = nil
            process.environment = environment
            let errors = Pipe()
            process.standardError = errors
            let result = try await runToEnd(process)
            let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(result.status == 64 || result.status == 2, "a usage error, status \(result.status)")
            #expect(message.contains("--rpc-listen-all needs --rpc-secret"), "\(message)")
            #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("jobs.db").path), "nothing was opened")
        }
    }

    @Test func tlsOptionsAreRefusedUntilSupported() async throws {
        try await withFolder { folder in
            let process = Process()
            process.executableURL = builtProduct("curlq")
            process.arguments = ["daemon", "--store", "sqlite:" + folder.appendingPathComponent("jobs.db").path, "-d", folder.path,
                                 "--enable-rpc", "--rpc-secure", "--rpc-certificate", "/dev/null"]
            let errors = Pipe()
            process.standardError = errors
            let result = try await runToEnd(process)
            let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(result.status != 0 && message.contains("not supported yet"), "\(message)")
        }
    }

    @Test func theSecretIsComparedWholeInTimeThatDoesNotDependOnWhereItDiffers() {
        #expect(ConstantTime.equal("abc", "abc"))
        #expect(!ConstantTime.equal("abd", "abc"))
        #expect(!ConstantTime.equal("ab", "abc"))
        #expect(!ConstantTime.equal("abcabc", "abc"), "a repetition of the secret is not the secret")
        #expect(!ConstantTime.equal("", "abc"))
        #expect(!ConstantTime.equal("abc", ""))
    }
}
