import Foundation
import HTTPTypes

/// The file format of a ``DiskCacheStore`` entry:
///
///     CQCACHE1\n
///     {one line of JSON: the key, status, fields, times, body length and SHA-256}\n
///     body bytes
///
/// Decoding checks everything it can: the magic, the JSON, the key, that the status and the
/// field names are valid, and the body's length and SHA-256. Any mismatch is `nil`.
enum DiskCacheEntry {
    static let magic = Data("CQCACHE1\n".utf8)

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
        var bodySHA256: String
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
            bodyLength: response.body.count,
            bodySHA256: SHA256.hex(of: response.body)
        )
        // JSONEncoder escapes control characters, so the metadata is one line.
        let json = (try? JSONEncoder().encode(metadata)) ?? Data()
        var data = Data(capacity: magic.count + json.count + 1 + response.body.count)
        data.append(magic)
        data.append(json)
        data.append(UInt8(ascii: "\n"))
        data.append(response.body)
        return data
    }

    static func decode(_ data: Data, key: String) -> CachedResponse? {
        guard data.starts(with: magic) else { return nil }
        let metadataStart = data.startIndex + magic.count
        guard let newline = data[metadataStart...].firstIndex(of: UInt8(ascii: "\n")),
              let metadata = try? JSONDecoder().decode(Metadata.self, from: data[metadataStart..<newline]),
              metadata.key == key,
              (100...999).contains(metadata.status),
              metadata.requestedAt.isFinite, metadata.receivedAt.isFinite
        else { return nil }
        let body = Data(data[(newline + 1)...])
        guard body.count == metadata.bodyLength, SHA256.hex(of: body) == metadata.bodySHA256 else { return nil }
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
