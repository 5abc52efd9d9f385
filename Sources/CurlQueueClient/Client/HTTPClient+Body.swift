import CurlQueue
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
