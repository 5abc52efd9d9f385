import Foundation

/// A request body as `curlq daemon --enable-rpc` reads it at `/jsonrpc` (HTTP or WebSocket),
/// with `JSONRPCMessage.parse`: curlq's own Sources/curlq/RPC/RPCValue.swift,
/// RPCValue+Parser.swift and JSONRPCMessage.swift through symbolic links.
///
/// Checked: any bytes give a message (never a trap or a hang); a parsed value written back as
/// JSON parses to the same value; a refusal's id is one a reply may carry (null, a string or a
/// number); no batch holds more than the limit.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSONRPC(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let limits = JSONRPCMessage.Limits()
    switch JSONRPCMessage.parse(bytes, limits: limits) {
    case .single(let element): check(element)
    case .batch(let elements):
        if elements.isEmpty || elements.count > limits.maxBatch { fatalError("a batch of \(elements.count)") }
        elements.forEach(check)
    }
    if let value = try? RPCValue.parse(bytes) {
        let text = value.json
        guard let again = try? RPCValue.parse(Array(text.utf8)) else { fatalError("written back as \(text), does not parse") }
        if again != value { fatalError("written back as \(text), parses to another value") }
    }
    return 0
}

private func check(_ element: Result<JSONRPCCall, JSONRPCRefusal>) {
    switch element {
    case .success(let call):
        if let id = call.id { checkID(id) }
        _ = call.reply(.success(.array(call.params))).json
    case .failure(let refusal):
        checkID(refusal.id)
        _ = JSONRPCCall.reply(id: refusal.id, .failure(refusal.error)).json
    }
}

private func checkID(_ id: RPCValue) {
    switch id {
    case .null, .string, .number: break
    default: fatalError("a reply id that is not null, a string or a number: \(id.json)")
    }
}
