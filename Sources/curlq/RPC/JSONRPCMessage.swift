import Foundation

/// An error as aria2 answers it: `{"code": N, "message": "..."}`. The JSON-RPC codes
/// (-32700 …) for malformed requests, 1 for everything aria2 itself refuses.
struct Aria2Error: Error, Sendable, Equatable {
    var code: Int
    var message: String

    static let parseError = Aria2Error(code: -32700, message: "Parse error.")
    static let invalidRequest = Aria2Error(code: -32600, message: "Invalid Request.")
    static let methodNotFound = Aria2Error(code: -32601, message: "Method not found.")
    static let invalidParams = Aria2Error(code: -32602, message: "Invalid params.")
    static let unauthorized = Aria2Error(code: 1, message: "Unauthorized")

    /// aria2's catch-all code 1 with `message`.
    static func refused(_ message: String) -> Aria2Error { Aria2Error(code: 1, message: message) }

    var value: RPCValue { .object([("code", .number(Int64(code))), ("message", .string(message))]) }
}

/// One call of a JSON-RPC request: a method and its positional parameters.
struct JSONRPCCall: Sendable, Equatable {
    /// The request's `id`, echoed in the reply; nil when the request had none.
    var id: RPCValue?
    var method: String
    var params: [RPCValue]
}

/// A request body as the endpoint reads it, before any method runs.
enum JSONRPCMessage: Sendable, Equatable {
    /// One request object; a malformed one is the error to answer with its id.
    case single(Result<JSONRPCCall, JSONRPCRefusal>)
    /// A batch (a JSON array), each element read as a single request.
    case batch([Result<JSONRPCCall, JSONRPCRefusal>])

    /// Limits on a request body (the HTTP body size is bounded before this).
    struct Limits: Sendable {
        var maxDepth = 32
        /// Calls in one batch.
        var maxBatch = 100
    }

    /// Reads a request body. Never throws or traps: what is not a request is a refusal to
    /// answer (aria2's codes, id null when none could be read).
    static func parse(_ bytes: [UInt8], limits: Limits = .init()) -> JSONRPCMessage {
        let value: RPCValue
        do {
            value = try RPCValue.parse(bytes, limits: .init(maxDepth: limits.maxDepth))
        } catch {
            return .single(.failure(JSONRPCRefusal(id: .null, error: .parseError)))
        }
        switch value {
        case .array(let elements):
            if elements.isEmpty { return .single(.failure(JSONRPCRefusal(id: .null, error: .invalidRequest))) }
            if elements.count > limits.maxBatch {
                return .single(.failure(JSONRPCRefusal(
                    id: .null, error: Aria2Error(code: -32600, message: "Invalid Request.: a batch holds at most \(limits.maxBatch) calls"))))
            }
            return .batch(elements.map(call))
        default:
            return .single(call(value))
        }
    }

    /// One request object read as a call.
    static func call(_ value: RPCValue) -> Result<JSONRPCCall, JSONRPCRefusal> {
        guard case .object = value else { return .failure(JSONRPCRefusal(id: .null, error: .invalidRequest)) }
        // aria2 answers every request, so it needs an id: one without is refused (JSON-RPC's
        // notifications are not taken, as aria2 takes none).
        guard let id = value["id"], Self.isValidID(id) else { return .failure(JSONRPCRefusal(id: .null, error: .invalidRequest)) }
        let echoed = id
        guard let method = value["method"]?.string else { return .failure(JSONRPCRefusal(id: echoed, error: .invalidRequest)) }
        let params: [RPCValue]
        switch value["params"] {
        case nil: params = []
        case .array(let values)?: params = values
        default: return .failure(JSONRPCRefusal(id: echoed, error: .invalidParams))
        }
        return .success(JSONRPCCall(id: id, method: method, params: params))
    }

    /// JSON-RPC 2.0: an id is a string, a number or null.
    private static func isValidID(_ id: RPCValue) -> Bool {
        switch id {
        case .string, .number, .null: true
        default: false
        }
    }
}

/// A request refused before any method ran: the error and the id to answer it with.
struct JSONRPCRefusal: Error, Sendable, Equatable {
    var id: RPCValue
    var error: Aria2Error
}

extension JSONRPCCall {
    /// The reply object for this call's outcome.
    func reply(_ outcome: Result<RPCValue, Aria2Error>) -> RPCValue {
        Self.reply(id: id ?? .null, outcome)
    }

    static func reply(id: RPCValue, _ outcome: Result<RPCValue, Aria2Error>) -> RPCValue {
        switch outcome {
        case .success(let result): .object([("id", id), ("jsonrpc", .string("2.0")), ("result", result)])
        case .failure(let error): .object([("id", id), ("jsonrpc", .string("2.0")), ("error", error.value)])
        }
    }
}
