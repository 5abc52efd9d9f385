import CurlQueue
import Foundation

extension HTTPClientError {
    /// A decoding error, with the path into the document where it happened.
    init(decoding error: any Error) {
        if let error = error as? HTTPClientError {
            self = error
            return
        }
        guard let error = error as? DecodingError else {
            self = .decoding(path: "$", message: "\(error)")
            return
        }
        let (context, message): (DecodingError.Context, String)
        switch error {
        case .typeMismatch(let type, let c): (context, message) = (c, "expected \(type): \(c.debugDescription)")
        case .valueNotFound(let type, let c): (context, message) = (c, "no value for \(type): \(c.debugDescription)")
        case .keyNotFound(let key, let c):
            (context, message) = (c, "missing key \(key.stringValue.debugDescription)")
            self = .decoding(path: JSONPath.string(context.codingPath + [key]), message: message)
            return
        case .dataCorrupted(let c): (context, message) = (c, c.debugDescription)
        @unknown default: (context, message) = (DecodingError.Context(codingPath: [], debugDescription: ""), "\(error)")
        }
        self = .decoding(path: JSONPath.string(context.codingPath), message: message)
    }
}
