import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The body of a request as libcurl reads it: from memory or from a file, rewindable so that
/// libcurl can send it again after a 307/308 redirect. Confined to the engine thread.
final class UploadSource {
    private enum Storage {
        case bytes(Data)
        case file(Int32)
    }

    private let storage: Storage
    private var position = 0
    let count: Int64

    init(_ body: Request.Body) throws(RequestError) {
        switch body {
        case .bytes(let data):
            storage = .bytes(data)
            count = Int64(data.count)
        case .file(let url):
            let fd = open(url.path, O_RDONLY | O_CLOEXEC)
            var info = stat()
            guard fd >= 0, fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
                if fd >= 0 { close(fd) }
                throw .invalidRequest("body file \(url.path) cannot be read")
            }
            storage = .file(fd)
            count = Int64(info.st_size)
        }
    }

    deinit {
        if case .file(let fd) = storage { close(fd) }
    }

    /// Copies up to `buffer.count` bytes; 0 at the end; nil on a read error.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        switch storage {
        case .bytes(let data):
            let n = min(buffer.count, data.count - position)
            guard n > 0 else { return 0 }
            data.withUnsafeBytes { source in
                buffer.baseAddress!.copyMemory(from: source.baseAddress! + position, byteCount: n)
            }
            position += n
            return n
        case .file(let fd):
            while true {
                let n = Glibc.read(fd, buffer.baseAddress, buffer.count)
                if n < 0 && errno == EINTR { continue }
                return n < 0 ? nil : n
            }
        }
    }

    /// Moves back to `offset` from the start; false when that is not possible.
    func seek(to offset: Int64) -> Bool {
        guard offset >= 0, offset <= count else { return false }
        switch storage {
        case .bytes:
            position = Int(offset)
            return true
        case .file(let fd):
            return lseek(fd, off_t(offset), SEEK_SET) == off_t(offset)
        }
    }
}
