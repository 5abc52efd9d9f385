import CurlQueue
import Foundation

extension MultipartForm {
    typealias Segment = Request.Body.Segment

    /// The body as segments, in order: heads and small pieces in memory, file contents as
    /// files. Adjacent memory segments are merged.
    func segments() throws(HTTPClientError) -> [Segment] {
        var segments: [Segment] = []
        var pending = Data()
        for part in parts {
            pending.append(contentsOf: Array("--\(boundary)\r\n".utf8))
            pending.append(contentsOf: Array(try head(of: part).utf8))
            switch part.content {
            case .bytes(let data):
                pending.append(data)
            case .file(let url):
                if !pending.isEmpty { segments.append(.bytes(pending)) }
                pending = Data()
                segments.append(.file(url))
            }
            pending.append(contentsOf: Array("\r\n".utf8))
        }
        pending.append(contentsOf: Array("--\(boundary)--\r\n".utf8))
        segments.append(.bytes(pending))
        return segments
    }

    /// The `Content-Disposition` (and `Content-Type`) lines of a part and the blank line after them.
    private func head(of part: Part) throws(HTTPClientError) -> String {
        var head = "Content-Disposition: form-data; name=\"\(try Self.quoted(part.name, what: "part name"))\""
        if let filename = part.filename {
            head += "; filename=\"\(try Self.quoted(filename, what: "file name"))\""
        }
        head += "\r\n"
        if let contentType = part.contentType {
            if contentType.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" || $0 == "\"" }) {
                throw .encoding("multipart content type of \(part.name.debugDescription) holds CR, LF, NUL or a quote")
            }
            head += "Content-Type: \(contentType)\r\n"
        }
        return head + "\r\n"
    }

    /// `text` for a quoted string: `"` becomes `%22` (as HTML forms do); CR, LF and NUL are refused.
    static func quoted(_ text: String, what: String) throws(HTTPClientError) -> String {
        if text.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) {
            throw .encoding("multipart \(what) \(text.debugDescription) holds CR, LF or NUL")
        }
        return text.replacingOccurrences(of: "\"", with: "%22")
    }

    /// The body for a ``Request``: the segments, file contents streamed from disk as they are
    /// sent (memory stays flat whatever the files' sizes). A file part that cannot be read now
    /// is an ``HTTPClientError/encoding(_:)`` error before anything is sent.
    func requestBody() throws(HTTPClientError) -> Request.Body {
        let segments = try segments()
        for case .file(let url) in segments {
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isFolder), !isFolder.boolValue,
                  FileManager.default.isReadableFile(atPath: url.path) else {
                throw .encoding("cannot read multipart file \(url.path)")
            }
        }
        return .segments(segments)
    }
}
