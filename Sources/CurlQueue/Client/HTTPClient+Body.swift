public import Foundation

extension HTTPClient {
    /// The body of a client call, encoded when the call starts.
    ///
    /// Each kind sets `Content-Type` unless the call's header fields (or the client's
    /// defaults) already hold one.
    public struct Body: Sendable {
        enum Storage: Sendable {
            case bytes(Data, contentType: String?)
            case file(URL, contentType: String?)
            case form([URLQueryItem])
            case json(@Sendable (JSONEncoder) throws -> Data)
            case multipart(MultipartForm)
        }

        let storage: Storage

        /// Bytes sent as they are, with `contentType` if given.
        public static func bytes(_ data: Data, contentType: String? = nil) -> Body {
            Body(storage: .bytes(data, contentType: contentType))
        }

        /// A file streamed from disk (see ``Request/Body/file(_:)``), with `contentType` if given.
        public static func file(_ url: URL, contentType: String? = nil) -> Body {
            Body(storage: .file(url, contentType: contentType))
        }

        /// `application/x-www-form-urlencoded` parameters, in order; a name may repeat. Names
        /// and values are percent-encoded as HTML forms do (a space becomes `+`, a `+` `%2B`).
        public static func form(_ parameters: [URLQueryItem]) -> Body {
            Body(storage: .form(parameters))
        }

        /// `application/x-www-form-urlencoded` parameters from a dictionary, sorted by name so
        /// that the same parameters always give the same body.
        public static func form(_ parameters: [String: String]) -> Body {
            .form(parameters.sorted { $0.key < $1.key }.map { URLQueryItem(name: $0.key, value: $0.value) })
        }

        /// `value` as JSON (`application/json`), encoded with the client's
        /// ``HTTPClient/Configuration/jsonEncoder`` when the call starts. An encoding failure
        /// ends the call with ``HTTPClientError/encoding(_:)``.
        public static func json<Value: Encodable & Sendable>(_ value: Value) -> Body {
            Body(storage: .json({ encoder in try encoder.encode(value) }))
        }

        /// A `multipart/form-data` form.
        public static func multipart(_ form: MultipartForm) -> Body {
            Body(storage: .multipart(form))
        }

        /// The body for ``Request``, and the `Content-Type` it implies.
        func encoded(with encoder: JSONEncoder) throws(HTTPClientError) -> (body: Request.Body, contentType: String?) {
            switch storage {
            case .bytes(let data, let contentType):
                return (.bytes(data), contentType)
            case .file(let url, let contentType):
                return (.file(url), contentType)
            case .form(let parameters):
                return (.bytes(Data(PercentEncoding.form(parameters).utf8)), "application/x-www-form-urlencoded")
            case .json(let encode):
                do {
                    return (.bytes(try encode(encoder)), "application/json")
                } catch {
                    throw .encoding("JSON: \(error)")
                }
            case .multipart(let form):
                return (try form.requestBody(), form.contentType)
            }
        }
    }
}

/// Percent-encoding for query strings and form bodies.
enum PercentEncoding {
    /// RFC 3986 unreserved characters: the only ones never encoded.
    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
             UInt8(ascii: "_"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    private static let hex = Array("0123456789ABCDEF".utf8)

    /// Every byte of `text`'s UTF-8 but the unreserved ones as `%XX`; a space is `%20` and
    /// a `+` `%2B`, so no server can read one as the other.
    static func component(_ text: String) -> String {
        encode(text, spaceAsPlus: false)
    }

    /// As ``component(_:)``, but a space is `+`, as `application/x-www-form-urlencoded` has it.
    static func formComponent(_ text: String) -> String {
        encode(text, spaceAsPlus: true)
    }

    private static func encode(_ text: String, spaceAsPlus: Bool) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            if isUnreserved(byte) {
                bytes.append(byte)
            } else if byte == UInt8(ascii: " ") && spaceAsPlus {
                bytes.append(UInt8(ascii: "+"))
            } else {
                bytes.append(UInt8(ascii: "%"))
                bytes.append(hex[Int(byte >> 4)])
                bytes.append(hex[Int(byte & 0x0F)])
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `name=value&…` for a URL query; an item without a value is just its name.
    static func query(_ items: [URLQueryItem]) -> String {
        items.map { item in
            item.value.map { component(item.name) + "=" + component($0) } ?? component(item.name)
        }.joined(separator: "&")
    }

    /// `name=value&…` for a form body; an item without a value has an empty one.
    static func form(_ items: [URLQueryItem]) -> String {
        items.map { formComponent($0.name) + "=" + formComponent($0.value ?? "") }.joined(separator: "&")
    }
}
