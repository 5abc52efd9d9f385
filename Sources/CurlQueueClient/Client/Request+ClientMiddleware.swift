import CurlQueue
import Foundation
import HTTPTypes

extension Request {
    /// The request with `Authorization: value`, unless it has one already.
    func authorized(with value: String) -> Request {
        guard headerFields[.authorization] == nil else { return self }
        var request = self
        request.headerFields[.authorization] = value
        return request
    }
}

extension Request {
    /// The body's size when it is known without reading a file.
    var bodySize: Int? {
        switch body {
        case .bytes(let data)?: return data.count
        default: return nil
        }
    }
}
