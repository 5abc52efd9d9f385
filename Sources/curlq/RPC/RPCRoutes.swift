import Foundation
import NIOHTTP1

/// A request the daemon's HTTP server hands to a route: the whole body, already bounded.
struct RPCHTTPRequest: Sendable {
    var method: HTTPMethod
    /// The path without the query, as sent (percent-encoded).
    var path: String
    var query: String?
    var headers: HTTPHeaders
    var body: [UInt8]
}

/// A route's answer. `Content-Length` and `Connection` are added by the server.
struct RPCHTTPResponse: Sendable {
    var status: HTTPResponseStatus
    var headers: [(String, String)]
    var body: [UInt8]
    /// Close the connection after this response (aria2 closes after an error reply).
    var close = false

    init(status: HTTPResponseStatus, contentType: String, body: [UInt8], close: Bool = false) {
        self.status = status
        self.headers = [("Content-Type", contentType)]
        self.body = body
        self.close = close
    }

    static func text(_ status: HTTPResponseStatus, _ text: String) -> RPCHTTPResponse {
        RPCHTTPResponse(status: status, contentType: "text/plain; charset=utf-8", body: Array((text + "\n").utf8), close: true)
    }
}

/// The daemon's HTTP routes: exact paths, each with the methods it takes. A path it does not
/// know is 404, a known path with another method 405. `/jsonrpc` is one; `GET /metrics` and
/// the web page's `GET /` and files are added the same way (``add(_:_:_:)``).
struct RPCRoutes: Sendable {
    typealias Handler = @Sendable (RPCHTTPRequest) async -> RPCHTTPResponse

    private var exact: [String: [String: Handler]] = [:]
    private var prefixes: [(prefix: String, methods: [String: Handler])] = []

    /// Answers `method` on `path` with `handler`. A `path` ending in `/*` answers every path
    /// under it (the longest prefix wins), for a folder of files.
    mutating func add(_ method: HTTPMethod, _ path: String, _ handler: @escaping Handler) {
        if path.hasSuffix("/*") {
            let prefix = String(path.dropLast())
            if let index = prefixes.firstIndex(where: { $0.prefix == prefix }) {
                prefixes[index].methods[method.rawValue] = handler
            } else {
                prefixes.append((prefix, [method.rawValue: handler]))
                prefixes.sort { $0.prefix.count > $1.prefix.count }
            }
        } else {
            exact[path, default: [:]][method.rawValue] = handler
        }
    }

    /// The answer to `request`.
    func respond(to request: RPCHTTPRequest) async -> RPCHTTPResponse {
        let methods = exact[request.path] ?? prefixes.first { request.path.hasPrefix($0.prefix) }?.methods
        guard let methods else { return .text(.notFound, "not found") }
        let method = request.method == .HEAD && methods["HEAD"] == nil ? "GET" : request.method.rawValue
        guard let handler = methods[method] else {
            var response = RPCHTTPResponse.text(.methodNotAllowed, "method not allowed")
            response.headers.append(("Allow", methods.keys.sorted().joined(separator: ", ")))
            return response
        }
        var response = await handler(request)
        if request.method == .HEAD { response.body = [] }
        return response
    }

    /// Whether a route answers `path` (for the WebSocket upgrade, which is only at `/jsonrpc`).
    func knows(_ path: String) -> Bool { exact[path] != nil }
}
