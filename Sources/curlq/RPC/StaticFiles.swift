import Foundation

/// The web page's files, served from a folder: SwiftPM's resource folder of `curlq`
/// (`CurlQueue_curlq.resources/Web`, beside the executable, once the target declares
/// `.copy("Web")`). Looked up by path, not through `Bundle.module`, whose accessor traps when the
/// folder is missing: a binary copied alone still serves the RPC, and the page answers 404.
struct StaticFiles: Sendable {
    /// The folder, or nil when it is not there.
    let folder: URL?

    /// The folder beside the running executable.
    static func besideExecutable() -> StaticFiles {
        let executable = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0])
        let folder = executable.deletingLastPathComponent().appendingPathComponent("CurlQueue_curlq.resources/Web")
        var isFolder: ObjCBool = false
        let exists = FileManager.default.fileExists(atPath: folder.path, isDirectory: &isFolder) && isFolder.boolValue
        return StaticFiles(folder: exists ? folder : nil)
    }

    static let types = [
        "html": "text/html; charset=utf-8", "js": "text/javascript; charset=utf-8", "css": "text/css; charset=utf-8",
        "svg": "image/svg+xml", "png": "image/png", "ico": "image/x-icon", "json": "application/json",
    ]

    /// `GET /` (index.html) and `GET /NAME`: only a plain name (letters, digits, `.`, `-`, `_`,
    /// no leading dot) of a regular file directly in the folder with a known type; nothing
    /// else, so no path leaves the folder.
    func respond(to request: RPCHTTPRequest) -> RPCHTTPResponse { respond(path: request.path) }

    func respond(path: String) -> RPCHTTPResponse {
        guard let folder else {
            return .text(.notFound, "the web page's files are not installed beside curlq (CurlQueue_curlq.resources/Web)")
        }
        let name = path == "/" ? "index.html" : String(path.dropFirst())
        guard !name.isEmpty, !name.hasPrefix("."), name.utf8.count <= 100,
              name.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || $0.properties.numericType != nil || "._-".unicodeScalars.contains($0)) }),
              let type = Self.types[(name as NSString).pathExtension.lowercased()]
        else { return .text(.notFound, "not found") }
        let path = folder.appendingPathComponent(name).path
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
              attributes[.type] as? FileAttributeType == .typeRegular,
              let data = FileManager.default.contents(atPath: path)
        else { return .text(.notFound, "not found") }
        var response = RPCHTTPResponse(status: .ok, contentType: type, body: Array(data))
        // The page loads nothing from another origin, and no other site may frame it.
        response.headers.append(("Content-Security-Policy", "default-src 'self'; connect-src 'self' ws: wss:; frame-ancestors 'none'"))
        return response
    }
}
