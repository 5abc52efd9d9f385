@testable import CurlQueue

/// A `Content-Range` value as a server sends it (`bytes 0-99/1000`, `bytes 0-0/*`), read with
/// `ContentRange.init?(_:)`, as the engine reads it to check the range of a resumed download.
///
/// Checked: a parsed range has 0 <= first <= last, and last < the complete length when that is
/// known; written back in the canonical form, it parses to the same range.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzContentRange(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let value = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    guard let range = ContentRange(value) else { return 0 }
    func check(_ condition: Bool, _ what: String) {
        if !condition { fatalError("ContentRange(\(value.debugDescription)): \(what): \(range)") }
    }
    check(range.first >= 0, "first < 0")
    check(range.first <= range.last, "first > last")
    if let complete = range.completeLength {
        check(range.last < complete, "last >= complete length")
    }
    let canonical = "bytes \(range.first)-\(range.last)/\(range.completeLength.map(String.init) ?? "*")"
    check(ContentRange(canonical) == range, "written back as \(canonical.debugDescription), parses to \(String(describing: ContentRange(canonical)))")
    return 0
}
