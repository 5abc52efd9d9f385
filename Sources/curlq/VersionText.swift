import CCurl  // curl_version, curl_version_info

/// `curlq --version`: curlq's version, then libcurl's own account of itself as `curl -V` gives
/// it (from `curl_version` and `curl_version_info`): its version and libraries, the TLS library,
/// the protocols and the features, so that a bug report says what the transfers ran on.
enum VersionText {
    static var full: String {
        var lines = ["curlq \(CurlqVersion.number) (\(String(cString: curl_version())))"]
        guard let info = curl_version_info(CURLVERSION_ELEVENTH)?.pointee else { return lines[0] }
        let libcurl = info.version.map { String(cString: $0) } ?? "unknown"
        let tls = info.ssl_version.map { String(cString: $0) } ?? "none"
        lines.append("libcurl \(libcurl), TLS: \(tls)")
        lines.append("Protocols: " + names(info.protocols).joined(separator: " "))
        if info.age.rawValue >= CURLVERSION_ELEVENTH.rawValue {
            lines.append("Features: " + names(info.feature_names).joined(separator: " "))
        }
        return lines.joined(separator: "\n")
    }

    /// The strings of a NULL-terminated C array.
    private static func names(_ list: UnsafePointer<UnsafePointer<CChar>?>?) -> [String] {
        guard var cursor = list else { return [] }
        var result: [String] = []
        while let name = cursor.pointee {
            result.append(String(cString: name))
            cursor += 1
        }
        return result
    }
}
