import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing
@testable import curlq

/// Bounded requests: a body over 1 MiB is refused (413) before it is read whole, JSON nested
/// deeper than 32 is a parse error, a batch of more than 100 calls is refused, and the daemon
/// goes on serving after each.
@Suite struct RPCLimitsTests {
    @Test func oversizedBodiesDeepJSONAndHugeBatchesAreRefused() async throws {
        try await withFolder { folder in
            let store = "sqlite:" + folder.appendingPathComponent("jobs.db").path
            let daemon = try RPCDaemonProcess(store: store, folder: folder.appendingPathComponent("files"))
            let port = daemon.port
            // Announced too large: refused from the head, nothing sent.
            let announced = try await rpcPost(port: port, "", headers: ["Content-Length": String(2 << 20)])
            #expect(announced.status == 413, "\(announced)")
            // Sent too large (chunked, no length): refused once the limit is passed.
            let chunked = try await offThePool { () -> RawResponse? in
                let connection = try RawConnection(port: port)
                connection.send("POST /jsonrpc HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n")
                let chunk = String(repeating: " ", count: 65536)
                for _ in 0..<20 { connection.send(String(65536, radix: 16) + "\r\n" + chunk + "\r\n") }
                return connection.response()
            }
            // 413, or a reset when the server closed with the rest of the body unread: never read whole.
            #expect(chunked == nil || chunked?.status == 413, "\(String(describing: chunked))")

            let deep = String(repeating: "[", count: 33) + String(repeating: "]", count: 33)
            let deepReply = try await rpcPost(port: port, #"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion","params":\#(deep)}"#)
            let deepCode = (try deepReply.json()["error"] as? [String: Any])?["code"] as? Int
            #expect(deepReply.status == 500 && deepCode == -32700, "\(deepReply)")
            let shallow = String(repeating: "[", count: 30) + String(repeating: "]", count: 30)
            let shallowReply = try await rpcPost(port: port, #"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion","params":[\#(shallow)]}"#)
            #expect(shallowReply.status == 200, "nesting within the bound is read: \(shallowReply)")

            let call = #"{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion","params":[]}"#
            let big = try await rpcPost(port: port, "[" + Array(repeating: call, count: 101).joined(separator: ",") + "]")
            let bigCode = (try big.json()["error"] as? [String: Any])?["code"] as? Int
            #expect(bigCode == -32600, "\(big)")
            let fine = try await rpcPost(port: port, "[" + Array(repeating: call, count: 100).joined(separator: ",") + "]")
            let replies = try JSONSerialization.jsonObject(with: Data(fine.body.utf8)) as? [Any]
            #expect(replies?.count == 100)
            #expect(try await daemon.stop() == 0)
        }
    }

    @Test func theParserReadsRequestsAndRefusesWhatIsNotOne() {
        func parse(_ text: String) -> JSONRPCMessage { JSONRPCMessage.parse(Array(text.utf8)) }
        #expect(parse(#"{"jsonrpc":"2.0","id":"a","method":"m","params":[1,"x"]}"#)
            == .single(.success(JSONRPCCall(id: .string("a"), method: "m", params: [.number("1"), .string("x")]))))
        #expect(parse(#"{"id":1.50,"method":"m"}"#) == .single(.success(JSONRPCCall(id: .number("1.50"), method: "m", params: []))),
                "an id goes back exactly as written")
        #expect(parse(#"{"method":"m","params":[]}"#) == .single(.failure(JSONRPCRefusal(id: .null, error: .invalidRequest))),
                "no id: refused, as aria2 refuses it")
        #expect(parse("nope") == .single(.failure(JSONRPCRefusal(id: .null, error: .parseError))))
        #expect(parse(#"{"id":1,"method":"m"} x"#) == .single(.failure(JSONRPCRefusal(id: .null, error: .parseError))))
        #expect(parse(#"{"id":1,"method":2}"#) == .single(.failure(JSONRPCRefusal(id: .number("1"), error: .invalidRequest))))
        #expect(parse(#"{"id":{},"method":"m"}"#) == .single(.failure(JSONRPCRefusal(id: .null, error: .invalidRequest))))
        #expect(parse(#"{"id":1,"method":"m","params":{"a":1}}"#) == .single(.failure(JSONRPCRefusal(id: .number("1"), error: .invalidParams))))
        #expect(parse("[]") == .single(.failure(JSONRPCRefusal(id: .null, error: .invalidRequest))))
        #expect(parse(#""\ud800""#) == .single(.failure(JSONRPCRefusal(id: .null, error: .parseError))), "a lone surrogate")
        #expect(parse("[\u{1}]") == .single(.failure(JSONRPCRefusal(id: .null, error: .parseError))))
        if case .batch(let calls) = parse(#"[{"id":1,"method":"a"},3]"#) {
            #expect(calls.count == 2)
        } else {
            Issue.record("not a batch")
        }
        let text = RPCValue.string("a\"\\\n\u{1}/é😀").json
        #expect(text == #""a\"\\\n\u0001/é😀""#)
        #expect((try? RPCValue.parse(Array(text.utf8))) == .string("a\"\\\n\u{1}/é😀"))
        #expect((try? RPCValue.parse(Array(#""\ud83d\ude00""#.utf8))) == .string("😀"))
        #expect((try? RPCValue.parse(Array("-0.5e+3".utf8))) == .number("-0.5e+3"))
        for bad in ["01", "-", "1.", "1e", "tru", "[1,]", #"{"a"}"#, #"{"a":1,}"#, "\"\u{7}\"", "\"\\x\""] {
            #expect((try? RPCValue.parse(Array(bad.utf8))) == nil, "\(bad)")
        }
        #expect((try? RPCValue.parse([0x22, 0xFF, 0x22])) == nil, "not UTF-8")
    }
}
