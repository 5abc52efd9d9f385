import CCurl  // curl_version_info

/// `curlq --version`: curlq's version, then libcurl's own account of itself as `curl -V` gives
/// it (from `curl_version_info`): its version and libraries, the TLS library,
/// the protocols and the features, so that a bug report says what the transfers ran on.
enum VersionText {
    static var full: String {
        // Not `curl_version()`: it asks libldap for its version, whose initialisation reads the
        // resolver configuration and keeps it (a leak valgrind reports in every curlq run, as
        // ArgumentParser builds this text for each run's configuration).
        guard let info = curl_version_info(CURLVERSION_ELEVENTH)?.pointee else { return "curlq \(CurlqVersion.number)" }
        let libcurl = info.version.map { String(cString: $0) } ?? "unknown"
        let tls = info.ssl_version.map { String(cString: $0) } ?? "none"
        var libraries = ["libcurl/\(libcurl)", tls]
        if let zlib = info.libz_version { libraries.append("zlib/" + String(cString: zlib)) }
        if let brotli = info.brotli_version { libraries.append("brotli/" + String(cString: brotli)) }
        if let idn = info.libidn { libraries.append("libidn2/" + String(cString: idn)) }
        if let ssh = info.libssh_version { libraries.append(String(cString: ssh)) }
        if info.nghttp2_ver_num != 0 {
            let v = info.nghttp2_ver_num
            libraries.append("nghttp2/\(v >> 16).\((v >> 8) & 0xFF).\(v & 0xFF)")
        }
        var lines = ["curlq \(CurlqVersion.number) (\(libraries.joined(separator: " ")))"]
        lines.append("libcurl \(libcurl), TLS: \(tls)")
        // The protocols curlq takes (its URLs are http and https only), of those libcurl has.
        lines.append("Protocols: " + names(info.protocols).filter { $0 == "http" || $0 == "https" }.joined(separator: " "))
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
