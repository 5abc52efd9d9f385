import CurlQueue
public import Foundation

/// A `multipart/form-data` body (RFC 7578): text fields and files, in order.
///
/// ```swift
/// var form = MultipartForm()
/// form.addField(name: "title", value: "Holiday")
/// form.addFile(name: "photo", filename: "beach.jpg", contentType: "image/jpeg", contentsOf: photoURL)
/// let response = try await client.post("photos", body: .multipart(form))
/// ```
///
/// Names and file names are written as HTML forms write them: in quotes, with `"` escaped as
/// `%22`. A name, file name or content type holding CR, LF or NUL is refused (it could start
/// a header or part of its own), and so is a content type holding `"`: the call fails with
/// ``HTTPClientError/encoding(_:)`` and nothing is sent.
public struct MultipartForm: Hashable, Sendable {
    /// One part of the form.
    public struct Part: Hashable, Sendable {
        /// Where a part's content comes from.
        public enum Content: Hashable, Sendable {
            /// Bytes in memory.
            case bytes(Data)
            /// A file on disk.
            case file(URL)
        }

        /// The form field's name.
        public var name: String
        /// The file name, for a file part.
        public var filename: String?
        /// The part's `Content-Type`, if any (text fields usually have none).
        public var contentType: String?
        /// The part's content.
        public var content: Content

        /// Creates a part.
        public init(name: String, filename: String? = nil, contentType: String? = nil, content: Content) {
            self.name = name
            self.filename = filename
            self.contentType = contentType
            self.content = content
        }
    }

    /// The boundary between parts: random, 30 characters, never found in ordinary content.
    public let boundary: String
    /// The parts, in order.
    public var parts: [Part] = []

    /// Creates an empty form with a fresh random boundary.
    public init() {
        var generator = SystemRandomNumberGenerator()
        let hex = (0..<4).map { _ in String(generator.next() as UInt32, radix: 16) }
        boundary = "CurlQueue-" + hex.map { String(repeating: "0", count: 8 - $0.count) + $0 }.joined().prefix(20)
    }

    /// Creates an empty form with the given boundary (1 to 70 letters, digits and `'()+_,-./:=?`;
    /// other characters are replaced by `-`).
    public init(boundary: String) {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'()+_,-./:=?".unicodeScalars)
        var cleaned = String.UnicodeScalarView()
        cleaned.append(contentsOf: boundary.unicodeScalars.prefix(70).map { allowed.contains($0) ? $0 : "-" })
        self.boundary = cleaned.isEmpty ? "-" : String(cleaned)
    }

    /// The `Content-Type` of the body: `multipart/form-data; boundary=…`, the boundary quoted
    /// when it holds a character a header parameter may not hold as a bare token
    /// (`(),/:=?`; RFC 2045, 5.1), which strict parsers refuse unquoted.
    public var contentType: String {
        let plain = boundary.unicodeScalars.allSatisfy { scalar in
            ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || "0123456789-_.'+".unicodeScalars.contains(scalar)
        }
        return "multipart/form-data; boundary=" + (plain ? boundary : "\"\(boundary)\"")
    }

    /// Appends a text field.
    public mutating func addField(name: String, value: String) {
        parts.append(Part(name: name, content: .bytes(Data(value.utf8))))
    }

    /// Appends a file part from memory.
    public mutating func addFile(name: String, filename: String, contentType: String = "application/octet-stream", data: Data) {
        parts.append(Part(name: name, filename: filename, contentType: contentType, content: .bytes(data)))
    }

    /// Appends a file part read from disk when the body is made; the file name defaults to
    /// the file's last path component.
    public mutating func addFile(name: String, filename: String? = nil, contentType: String = "application/octet-stream", contentsOf file: URL) {
        parts.append(Part(name: name, filename: filename ?? file.lastPathComponent, contentType: contentType, content: .file(file)))
    }
}
