import CurlQueue
import Foundation
import HTTPTypes

/// The file format of a ``DiskCacheStore`` entry:
///
///     CQCACHE3 <SHA-256 of everything after this line, 64 hex digits>\n
///     {one line of JSON: the key, status, fields, times and body length}\n
///     body bytes
///
/// Version 3 (`CQCACHE3`) came with keys that hold a keyed hash of the request's credentials
/// instead of nothing: a file of an older version is a miss (and is removed), never read as
/// an answer for anyone.
///
/// Decoding checks everything it can: the magic, the digest (so a changed byte anywhere, in
/// the metadata as in the body, is caught), the JSON, the key, that the status and the field
/// names are valid, and the body's length. Any mismatch is `nil`.
enum DiskCacheEntry {
    static let magic = Data("CQCACHE3 ".utf8)
    static let digestLength = 64

    private struct Metadata: Codable {
        var key: String
        var status: Int
        var reason: String
        var fields: [[String]]
        var requestedAt: Double
        var receivedAt: Double
        var vary: [String: String]
        var timeToLiveNanoseconds: Int64?
        var bodyLength: Int
    }

    static func encode(_ response: CachedResponse, key: String) -> Data {
        let metadata = Metadata(
            key: key,
            status: response.status.code,
            reason: response.status.reasonPhrase,
            fields: response.headerFields.map { [$0.name.rawName, $0.value] },
            requestedAt: response.requestedAt.timeIntervalSince1970,
            receivedAt: response.receivedAt.timeIntervalSince1970,
            vary: response.varyingRequestFields,
            timeToLiveNanoseconds: response.timeToLive.map(Self.nanoseconds),
            bodyLength: response.body.count
        )
        // JSONEncoder escapes control characters, so the metadata is one line.
        let json = (try? JSONEncoder().encode(metadata)) ?? Data()
        var hasher = SHA256()
        json.withUnsafeBytes { hasher.update($0) }
        hasher.update(CollectionOfOne(UInt8(ascii: "\n")))
        response.body.withUnsafeBytes { hasher.update($0) }
        var data = Data(capacity: magic.count + digestLength + 2 + json.count + response.body.count)
        data.append(magic)
        data.append(Data(hasher.finalize().utf8))
        data.append(UInt8(ascii: "\n"))
        data.append(json)
        data.append(UInt8(ascii: "\n"))
        data.append(response.body)
        return data
    }

    static func decode(_ data: Data, key: String) -> CachedResponse? {
        guard data.starts(with: magic), data.count > magic.count + digestLength else { return nil }
        let digestStart = data.startIndex + magic.count
        let metadataStart = digestStart + digestLength + 1
        guard data[metadataStart - 1] == UInt8(ascii: "\n"), metadataStart <= data.endIndex else { return nil }
        let digest = String(decoding: data[digestStart..<(digestStart + digestLength)], as: UTF8.self)
        var hasher = SHA256()
        data[metadataStart...].withUnsafeBytes { hasher.update($0) }
        guard hasher.finalize() == digest else { return nil }
        guard let newline = data[metadataStart...].firstIndex(of: UInt8(ascii: "\n")),
              let metadata = try? JSONDecoder().decode(Metadata.self, from: data[metadataStart..<newline]),
              metadata.key == key,
              (100...999).contains(metadata.status),
              metadata.requestedAt.isFinite, metadata.receivedAt.isFinite
        else { return nil }
        let body = Data(data[(newline + 1)...])
        guard body.count == metadata.bodyLength else { return nil }
        var fields = HTTPFields()
        for pair in metadata.fields {
            guard pair.count == 2, let name = HTTPField.Name(pair[0]) else { return nil }
            fields.append(HTTPField(name: name, value: pair[1]))
        }
        return CachedResponse(
            status: HTTPResponse.Status(code: metadata.status, reasonPhrase: metadata.reason),
            headerFields: fields,
            body: body,
            requestedAt: Date(timeIntervalSince1970: metadata.requestedAt),
            receivedAt: Date(timeIntervalSince1970: metadata.receivedAt),
            varyingRequestFields: metadata.vary,
            timeToLive: metadata.timeToLiveNanoseconds.map { .nanoseconds($0) }
        )
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? (seconds < 0 ? .min : .max) : whole.addingReportingOverflow(attoseconds / 1_000_000_000).partialValue
    }
}
