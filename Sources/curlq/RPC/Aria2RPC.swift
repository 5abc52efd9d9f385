import CurlQueue
import CurlQueueDurable
import Foundation
import NIOHTTP1

/// aria2's JSON-RPC methods on the daemon's job store: every answer comes from the store, so
/// any daemon of a shared store shows and changes the whole queue.
final class Aria2RPC: Sendable {
    let store: any JobStore
    let queue: String
    /// The daemon's folder: every destination stays inside it.
    let folder: URL
    let secret: String?
    let settings: Aria2Settings
    let limits: JSONRPCMessage.Limits
    /// For `getGlobalOption`: what the daemon was started with.
    let globalOptions: [(String, String)]

    /// The live progress of the jobs this daemon runs (``DurableWorker/progress``).
    let progress: @Sendable () -> [JobID: DurableWorker.Progress]

    init(store: any JobStore, queue: String, folder: URL, secret: String?, settings: Aria2Settings,
         progress: @escaping @Sendable () -> [JobID: DurableWorker.Progress] = { [:] },
         globalOptions: [(String, String)], limits: JSONRPCMessage.Limits = .init()) {
        self.progress = progress
        self.store = store
        self.queue = queue
        self.folder = folder
        self.secret = secret
        self.settings = settings
        self.globalOptions = globalOptions
        self.limits = limits
    }

    /// The methods answered, as `system.listMethods` lists them.
    static let methods = [
        "aria2.addUri", "aria2.remove", "aria2.forceRemove", "aria2.pause", "aria2.forcePause", "aria2.pauseAll",
        "aria2.forcePauseAll", "aria2.unpause", "aria2.unpauseAll", "aria2.changePosition", "aria2.tellStatus",
        "aria2.getUris", "aria2.getFiles", "aria2.tellActive", "aria2.tellWaiting", "aria2.tellStopped",
        "aria2.getOption", "aria2.changeOption", "aria2.getGlobalOption", "aria2.changeGlobalOption",
        "aria2.purgeDownloadResult", "aria2.removeDownloadResult", "aria2.getVersion", "aria2.getSessionInfo",
        "aria2.getGlobalStat", "system.multicall", "system.listMethods", "system.listNotifications",
    ]

    static let notifications = [
        "aria2.onDownloadStart", "aria2.onDownloadPause", "aria2.onDownloadStop", "aria2.onDownloadComplete",
        "aria2.onDownloadError", "aria2.onBtDownloadComplete",
    ]

    // MARK: Transport

    /// `POST /jsonrpc`: aria2's status codes (200; 400 and a closed connection for an error
    /// reply; 500 for a body that is not JSON or params that are not an array).
    func http(_ request: RPCHTTPRequest) async -> RPCHTTPResponse {
        let (reply, failure) = await answer(request.body)
        let status: HTTPResponseStatus = switch failure {
        case nil: .ok
        case .some(-32700), .some(-32602): .internalServerError  // aria2c's statuses, checked by RPCDifferentialTests
        default: .badRequest
        }
        return RPCHTTPResponse(status: status, contentType: "application/json-rpc", body: Array((reply ?? "").utf8),
                               close: failure != nil)
    }

    /// One WebSocket message: its reply.
    func webSocket(_ bytes: [UInt8]) async -> [UInt8]? {
        let (reply, _) = await answer(bytes)
        return reply.map { Array($0.utf8) }
    }

    /// The reply to a request body, and the code of its error when it is one single error.
    func answer(_ body: [UInt8]) async -> (reply: String?, error: Int?) {
        switch JSONRPCMessage.parse(body, limits: limits) {
        case .single(.failure(let refusal)):
            return (JSONRPCCall.reply(id: refusal.id, .failure(refusal.error)).json, refusal.error.code)
        case .single(.success(let call)):
            let outcome = await run(call)
            if case .failure(let error) = outcome { return (call.reply(outcome).json, error.code) }
            return (call.reply(outcome).json, nil)
        case .batch(let elements):
            var replies: [RPCValue] = []
            for element in elements {
                switch element {
                case .failure(let refusal): replies.append(JSONRPCCall.reply(id: refusal.id, .failure(refusal.error)))
                case .success(let call): replies.append(call.reply(await run(call)))
                }
            }
            return (RPCValue.array(replies).json, nil)
        }
    }

    // MARK: Dispatch

    /// Runs one call: the secret checked first (aria2's `token:SECRET` as the first parameter),
    /// then the method.
    func run(_ call: JSONRPCCall, nested: Bool = false) async -> Result<RPCValue, Aria2Error> {
        switch call.method {
        case "system.listMethods": return .success(.array(Self.methods.map(RPCValue.string)))
        case "system.listNotifications": return .success(.array(Self.notifications.map(RPCValue.string)))
        case "system.multicall":
            if nested { return .failure(.refused("system.multicall cannot be nested")) }
            return await multicall(call.params)
        default: break
        }
        var params = call.params
        if let secret {
            guard case .string(let given)? = params.first, given.hasPrefix("token:"),
                  ConstantTime.equal(String(given.dropFirst("token:".count)), secret)
            else { return .failure(.unauthorized) }
            params.removeFirst()
        } else if case .string(let given)? = params.first, given.hasPrefix("token:") {
            params.removeFirst()
        }
        do {
            return .success(try await method(call.method, Params(params)))
        } catch {
            return .failure(error)
        }
    }

    private func method(_ name: String, _ params: Params) async throws(Aria2Error) -> RPCValue {
        switch name {
        case "aria2.addUri": return try await addUri(params)
        case "aria2.tellStatus": return try await tellStatus(params)
        case "aria2.getUris": return try await getUris(params)
        case "aria2.getFiles": return try await getFiles(params)
        case "aria2.tellActive": return try await tellActive(params)
        case "aria2.tellWaiting": return try await tellList(params, waiting: true)
        case "aria2.tellStopped": return try await tellList(params, waiting: false)
        case "aria2.remove", "aria2.forceRemove": return try await remove(params)
        case "aria2.pause", "aria2.forcePause", "aria2.unpause": return try await pause(params, name: name)
        case "aria2.pauseAll", "aria2.forcePauseAll": return try await setPaused(true)
        case "aria2.unpauseAll": return try await setPaused(false)
        case "aria2.getGlobalStat": return try await globalStat()
        case "aria2.getVersion": return Self.version
        case "aria2.getSessionInfo": return .object([("sessionId", .string(Self.session))])
        case "aria2.getOption": return try await getOption(params)
        case "aria2.changeOption": return try await changeOption(params)
        case "aria2.getGlobalOption": return getGlobalOption()
        case "aria2.changeGlobalOption": return try changeGlobalOption(params)
        case "aria2.changePosition":
            throw .refused("curlq daemon cannot move a download yet: a job's place follows its priority and when it was added")
        case "aria2.purgeDownloadResult": return try await purge()
        case "aria2.removeDownloadResult": return try await removeResult(params)
        default: throw .refused("No such method: \(name)")
        }
    }

    /// `system.multicall([{methodName, params}, …])`: each result wrapped in an array, each
    /// error as its object (aria2's shape).
    private func multicall(_ params: [RPCValue]) async -> Result<RPCValue, Aria2Error> {
        guard params.count == 1, case .array(let calls) = params[0] else { return .failure(.invalidParams) }
        guard calls.count <= limits.maxBatch else {
            return .failure(.refused("a multicall holds at most \(limits.maxBatch) calls"))
        }
        var results: [RPCValue] = []
        for entry in calls {
            guard case .object = entry, let name = entry["methodName"]?.string else {
                results.append(Aria2Error.refused("Missing methodName.").value)
                continue
            }
            let inner: [RPCValue]
            switch entry["params"] {
            case nil: inner = []
            case .array(let values)?: inner = values
            default:
                results.append(Aria2Error.refused("Missing params.").value)
                continue
            }
            switch await run(JSONRPCCall(id: nil, method: name, params: inner), nested: true) {
            case .success(let value): results.append(.array([value]))
            case .failure(let error): results.append(error.value)
            }
        }
        return .success(.array(results))
    }

    static let version = RPCValue.object([
        ("enabledFeatures", .array(["HTTPS", "Message Digest"].map(RPCValue.string))),
        ("version", .string(CurlqVersion.number)),
    ])

    /// This process's session: 40 hexadecimal digits, as aria2's.
    static let session: String = (0..<5).map { _ in
        let hex = String(UInt64.random(in: 0...UInt64(UInt32.max)), radix: 16)
        return String(repeating: "0", count: 8 - hex.count) + hex
    }.joined()
}

/// A method's positional parameters (the token already taken off), read with aria2's errors.
struct Params {
    var values: [RPCValue]
    init(_ values: [RPCValue]) { self.values = values }

    subscript(index: Int) -> RPCValue? { index < values.count ? values[index] : nil }

    /// The GID at `index`: aria2's "Invalid GID" for anything not 16 hexadecimal digits.
    func gid(_ index: Int) throws(Aria2Error) -> (gid: String, job: JobID) {
        guard case .string(let text)? = self[index] else { throw .refused("The parameter at \(index) has wrong type.") }
        guard let job = GID.job(text) else { throw .refused("Invalid GID \(text)") }
        return (text.lowercased(), job)
    }

    /// An integer at `index` (a number or a string of digits), or `fallback` when absent.
    func integer(_ index: Int, _ fallback: Int? = nil) throws(Aria2Error) -> Int {
        guard let value = self[index] else {
            if let fallback { return fallback }
            throw .invalidParams
        }
        guard let number = value.integer else { throw .refused("The parameter at \(index) has wrong type.") }
        return number
    }

    /// The key filter at `index`: nil when absent (every key).
    func keys(_ index: Int) throws(Aria2Error) -> Set<String>? {
        guard let value = self[index] else { return nil }
        guard case .array(let items) = value else { throw .refused("The parameter at \(index) has wrong type.") }
        var keys = Set<String>()
        for item in items {
            guard let key = item.string else { throw .refused("The parameter at \(index) has wrong type.") }
            keys.insert(key)
        }
        return keys
    }
}
