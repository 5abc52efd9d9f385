import CurlQueue
import Foundation
import OpenAPIRuntime
#if canImport(Glibc)
import Glibc
#endif

/// A request body read from an `HTTPBody` into what the engine sends: the first bytes in memory,
/// the rest (if any) in a private temporary file written as the body is read, so memory does not
/// grow with the body's size.
struct SpooledBody: Sendable {
    /// What the request sends.
    let body: Request.Body
    /// The temporary file, if the body did not fit in memory.
    let file: URL?

    /// Reads `source` to its end. Throws the error the body threw, or ``RequestError/fileSystem(_:)``
    /// when the temporary file cannot be written (it is removed then).
    static func read(_ source: HTTPBody, memoryLimit: Int, directory: URL) async throws -> SpooledBody {
        var head: [UInt8] = []
        if case .known(let length) = source.length { head.reserveCapacity(Int(min(length, Int64(memoryLimit)))) }
        var spool: SpoolFile?
        do {
            for try await chunk in source {
                if let file = spool {
                    try file.write(chunk)
                } else if head.count + chunk.count <= memoryLimit {
                    head.append(contentsOf: chunk)
                } else {
                    let file = try SpoolFile(directory: directory)
                    spool = file
                    try file.write(chunk)
                }
            }
        } catch {
            spool?.close()
            if let spool { unlink(spool.path) }
            throw error
        }
        guard let spool else { return SpooledBody(body: .bytes(Data(head)), file: nil) }
        spool.close()
        let url = URL(fileURLWithPath: spool.path)
        return SpooledBody(body: head.isEmpty ? .file(url) : .segments([.bytes(Data(head)), .file(url)]), file: url)
    }

    /// Removes the temporary file (a transfer that has it open keeps reading it).
    func remove() {
        if let file { unlink(file.path) }
    }
}

/// A new file of the spool: created exclusively, readable by the owner only.
private final class SpoolFile {
    let path: String
    private var fd: Int32

    init(directory: URL) throws(RequestError) {
        path = directory.appendingPathComponent("curlqueue-openapi-\(UUID().uuidString).body").path
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw .fileSystem("cannot create the request body's spool file \(path): \(String(cString: strerror(errno)))")
        }
    }

    func write(_ chunk: ArraySlice<UInt8>) throws(RequestError) {
        var failure: Int32 = 0
        chunk.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let n = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                offset += n
            }
        }
        if failure != 0 {
            throw .fileSystem("cannot write the request body's spool file \(path): \(String(cString: strerror(failure)))")
        }
    }

    func close() {
        if fd >= 0 { _ = Glibc.close(fd) }
        fd = -1
    }

    deinit { close() }
}
