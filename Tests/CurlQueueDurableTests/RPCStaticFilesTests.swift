import CurlQueueTestHelpers
import Foundation
import Testing
@testable import curlq

/// The web page's files as the daemon serves them: `/` is index.html, `/NAME` a plain file of
/// the folder with a known type; a path that climbs, a hidden file, a symbolic link, a
/// subfolder or an unknown type is 404; a missing folder is 404 with a sentence.
@Suite struct RPCStaticFilesTests {
    func get(_ files: StaticFiles, _ path: String) -> RPCHTTPResponse {
        files.respond(path: path)
    }

    @Test func onlyPlainFilesOfTheFolderAreServed() throws {
        try withFolderSync { folder in
            try Data("<p>page</p>".utf8).write(to: folder.appendingPathComponent("index.html"))
            try Data("let a = 1".utf8).write(to: folder.appendingPathComponent("app.js"))
            try Data("secret".utf8).write(to: folder.appendingPathComponent(".hidden.js"))
            try Data("x".utf8).write(to: folder.appendingPathComponent("tool.exe"))
            try FileManager.default.createDirectory(at: folder.appendingPathComponent("sub"), withIntermediateDirectories: true)
            try Data("x".utf8).write(to: folder.appendingPathComponent("sub/in.js"))
            try FileManager.default.createSymbolicLink(atPath: folder.appendingPathComponent("link.js").path, withDestinationPath: "/etc/passwd")
            let files = StaticFiles(folder: folder)
            let index = get(files, "/")
            #expect(index.status.code == 200 && index.body == Array("<p>page</p>".utf8))
            #expect(index.headers.contains { $0.0 == "Content-Type" && $0.1.hasPrefix("text/html") })
            #expect(index.headers.contains { $0.0 == "Content-Security-Policy" && $0.1.contains("default-src 'self'") })
            let script = get(files, "/app.js")
            #expect(script.status.code == 200 && script.headers.contains { $0.0 == "Content-Type" && $0.1.hasPrefix("text/javascript") })
            for path in ["/../index.html", "/%2e%2e/index.html", "/.hidden.js", "/sub/in.js", "/link.js", "/tool.exe", "/missing.js",
                         "/..", "//etc/passwd", "/app.js/"] {
                let response = get(files, path)
                #expect(response.status.code == 404, "\(path): \(response.status.code)")
                #expect(!String(decoding: response.body, as: UTF8.self).contains("root:"), "\(path)")
            }
            let none = get(StaticFiles(folder: nil), "/")
            #expect(none.status.code == 404 && String(decoding: none.body, as: UTF8.self).contains("not installed"))
        }
    }

    func withFolderSync(_ body: (URL) throws -> Void) throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try body(folder)
    }
}
