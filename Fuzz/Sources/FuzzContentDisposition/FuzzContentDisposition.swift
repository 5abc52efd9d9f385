@testable import CurlQueueDownloads
import Foundation

/// A `Content-Disposition` field value, read with `ContentDisposition.safeName(_:)` (curlq's
/// `-J`, in CurlQueueDownloads).
///
/// Checked: a name, when there is one, is not empty, holds no `/` or `\` (as Unicode scalars),
/// is not `.` or `..`, does not start with a dot or a dash, has no control character and is at most
/// `SafeFileName.maxBytes` bytes of UTF-8; and made safe again it stays the same (the rules
/// are idempotent, so the name is exactly what the URL rules would give it).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzContentDisposition(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let field = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    _ = ContentDisposition.fileName(field)
    guard let name = ContentDisposition.safeName(field) else { return 0 }
    let scalars = name.unicodeScalars
    check(!name.isEmpty, "an empty name")
    check(!scalars.contains("/") && !scalars.contains("\\"), "a separator in \(name.debugDescription)")
    check(name != "." && name != "..", "the name \(name.debugDescription)")
    check(scalars.first != "." && scalars.first != "-", "a leading dot or dash in \(name.debugDescription)")
    check(!scalars.contains { $0.properties.generalCategory == .control }, "a control character in \(name.debugDescription)")
    check(name.utf8.count <= SafeFileName.maxBytes, "\(name.utf8.count) bytes")
    check(SafeFileName.sanitizedName(name) == name, "not stable: \(name.debugDescription)")
    return 0
}

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("ContentDisposition: \(message())") }
}
