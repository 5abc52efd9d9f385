import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// The WebSocket at `/jsonrpc`: calls answered as over HTTP (fragments joined), pings
/// answered, and aria2's notifications pushed as the store's jobs start, complete, fail and
/// are removed.
@Suite struct RPCWebSocketTests {
    @Test func callsAreAnsweredAndEveryChangeIsNotified() async throws {
        try await withServer { server in
            try await withFolder { folder in
                let store = "sqlite:" + folder.appendingPathComponent("jobs.db").path
                let daemon = try RPCDaemonProcess(store: store, folder: folder.appendingPathComponent("files"),
                                                  arguments: ["--rpc-secret", "ws"])
                let port = daemon.port
                let ok = server.url("/bytes/2000").absoluteString
                let gone = server.url("/status/404").absoluteString
                let slow = server.url("/bytes/100000?stallAfter=1000").absoluteString
                let (notes, replies) = try await offThePool { () -> ([String], [String]) in
                    let socket = try RawConnection(port: port)
                    guard socket.upgrade(host: "127.0.0.1:\(port)") == 101 else { return ([], ["no upgrade"]) }
                    var notes: [String] = []
                    var replies: [String] = []
                    func next() -> String? {
                        while let frame = socket.frame() {
                            switch frame.opcode {
                            case 0x1:
                                let text = String(decoding: frame.payload, as: UTF8.self)
                                if text.contains("\"method\":\"aria2.on") { notes.append(text) } else { return text }
                            case 0xA: return "pong:" + String(decoding: frame.payload, as: UTF8.self)
                            default: return nil
                            }
                        }
                        return nil
                    }
                    socket.sendFrame(opcode: 0x9, Array("hi".utf8))
                    replies.append(next() ?? "")
                    // One call in two fragments.
                    let call = Array(#"{"jsonrpc":"2.0","id":"v","method":"aria2.getVersion","params":["token:ws"]}"#.utf8)
                    socket.sendFrame(opcode: 0x1, Array(call[..<10]), fin: false)
                    socket.sendFrame(opcode: 0x0, Array(call[10...]))
                    replies.append(next() ?? "")
                    for (id, url) in [("a", ok), ("b", gone), ("c", slow)] {
                        socket.sendFrame(opcode: 0x1, Array(#"{"jsonrpc":"2.0","id":"\#(id)","method":"aria2.addUri","params":["token:ws",["\#(url)"]]}"#.utf8))
                        replies.append(next() ?? "")
                    }
                    // Wait for: 1 complete, 2 error, 3 start; then remove 3 and wait for its stop.
                    let deadline = Date().addingTimeInterval(60)
                    func waitFor(_ text: String) {
                        while !notes.contains(where: { $0.contains(text) }), Date() < deadline {
                            guard let frame = socket.frame() else { return }
                            if frame.opcode == 0x1 { notes.append(String(decoding: frame.payload, as: UTF8.self)) }
                        }
                    }
                    waitFor(#""method":"aria2.onDownloadComplete","params":[{"gid":"0000000000000001"}]"#)
                    waitFor(#""method":"aria2.onDownloadError","params":[{"gid":"0000000000000002"}]"#)
                    waitFor(#""method":"aria2.onDownloadStart","params":[{"gid":"0000000000000003"}]"#)
                    socket.sendFrame(opcode: 0x1, Array(#"{"jsonrpc":"2.0","id":"r","method":"aria2.forceRemove","params":["token:ws","0000000000000003"]}"#.utf8))
                    replies.append(next() ?? "")
                    waitFor(#""method":"aria2.onDownloadStop","params":[{"gid":"0000000000000003"}]"#)
                    socket.sendFrame(opcode: 0x8, [0x03, 0xE8])
                    return (notes, replies)
                }
                #expect(replies.first == "pong:hi", "\(replies)")
                #expect(replies.count == 6 && replies[1].contains(#""id":"v""#) && replies[1].contains("\"version\""), "\(replies)")
                #expect(replies.count == 6 && replies[2].contains(#""result":"0000000000000001""#), "\(replies)")
                #expect(replies.count == 6 && replies[5].contains(#""result":"0000000000000003""#), "\(replies)")
                for expected in [("aria2.onDownloadComplete", 1), ("aria2.onDownloadError", 2), ("aria2.onDownloadStart", 3), ("aria2.onDownloadStop", 3)] {
                    let text = #"{"jsonrpc":"2.0","method":"\#(expected.0)","params":[{"gid":"000000000000000\#(expected.1)"}]}"#
                    #expect(notes.contains(text), "\(expected): \(notes)")
                }
                #expect(try await daemon.stop() == 0)
            }
        }
    }
}
