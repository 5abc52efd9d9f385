import CurlQueue
@testable import CurlQueueDownloads
import Foundation

/// A curlq input file (`curlq get -i FILE`), read with `InputFile.parse(_:origin:)` (CurlQueueDownloads).
///
/// Checked: an error names a line of the file, and its message has no control characters (curlq
/// prints it to the terminal). Each entry comes from a line of its own, in order; its URL and each
/// of its mirrors (TAB-separated on that line; at most `maxMirrors`, none twice) is http or https
/// with a host and no space or control character; `out=` is not empty; a checksum (`sha256=`, `sha512=`, `sha1=`,
/// `md5=`) has its algorithm's number of lowercase hex digits; header names are tokens, and
/// values have no ASCII control characters but tabs (none that a header line cannot carry: C1
/// controls, U+0080 to U+009F, are UTF-8 bytes above 0x7F, obs-text), nor
/// spaces or tabs at either end.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzInputFile(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    let lineCount = bytes.count(where: { $0 == 0x0A }) + 1
    let entries: [InputEntry]
    do {
        entries = try InputFile.parse(Data(bytes), origin: "urls.txt")
    } catch {
        check((1...lineCount).contains(error.line), "error on line \(error.line) of \(lineCount)")
        check(!error.message.isEmpty && !error.description.unicodeScalars.contains(where: isControl),
              "error message \(error.description.debugDescription)")
        return 0
    }
    var previousLine = 0
    for entry in entries {
        check(entry.origin.hasPrefix("urls.txt:"), "origin \(entry.origin)")
        let line = Int(entry.origin.dropFirst("urls.txt:".count)) ?? 0
        check(line > previousLine && line <= lineCount, "entry from line \(line), after \(previousLine), of \(lineCount)")
        previousLine = line
        // A line of TAB-separated URLs: the first and its mirrors, each a URL the same rules allow.
        check(entry.urls.count <= InputFile.maxMirrors, "\(entry.urls.count) URLs on one line")
        check(Set(entry.urls).count == entry.urls.count, "a URL twice among \(entry.urls)")
        for url in entry.urls {
            check(["http", "https"].contains(url.scheme?.lowercased()), "scheme of \(url)")
            check(!(url.host ?? "").isEmpty, "no host in \(url)")
            check(!url.absoluteString.unicodeScalars.contains { $0.properties.isWhitespace || isControl($0) },
                  "a space or control character in \(url.absoluteString.debugDescription)")
        }
        if let out = entry.out { check(!out.isEmpty, "empty out=") }
        if let checksum = entry.checksum {
            let hex = checksum.hex
            check(hex.utf8.count == checksum.algorithm.hexLength
                    && hex.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) },
                  "\(checksum.algorithm.rawValue)= \(hex.debugDescription)")
        }
        for header in entry.headers {
            check(!header.name.isEmpty && header.name.unicodeScalars.allSatisfy(isTokenScalar),
                  "header name \(header.name.debugDescription)")
            check(!header.value.unicodeScalars.contains { $0 != "\t" && ($0.value < 0x20 || $0.value == 0x7F) }
                    && header.value.first != " " && header.value.first != "\t"
                    && header.value.last != " " && header.value.last != "\t",
                  "header value \(header.value.debugDescription)")
        }
    }
    return 0
}

/// C0, DEL and C1.
private func isControl(_ scalar: Unicode.Scalar) -> Bool {
    scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
}

/// RFC 9110 tchar.
private func isTokenScalar(_ scalar: Unicode.Scalar) -> Bool {
    scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar)
        || "!#$%&'*+-.^_`|~".unicodeScalars.contains(scalar))
}

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("InputFile: \(message())") }
}
