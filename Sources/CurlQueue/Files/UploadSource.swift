import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The body of a request as libcurl reads it: parts from memory and from files, sent in order,
/// rewindable so that libcurl can send it again after a 307/308 redirect, or a streamed body's
/// channel. Made for each attempt (files are opened again); confined to the engine thread.
///
/// Files are read with `pread` at the offset the body position maps to, so nothing but the
/// position has to be restored on a rewind, and memory use does not depend on their size.
final class UploadSource {
    private enum Part {
        case bytes(Data)
        /// An open file descriptor and the size the file had when it was opened: exactly that
        /// many bytes are sent from it.
        case file(fd: Int32, size: Int64, path: String)

        var count: Int64 {
            switch self {
            case .bytes(let data): return Int64(data.count)
            case .file(_, let size, _): return size
            }
        }
    }

    private var parts: [Part] = []
    /// Where each part starts in the body: `starts[i]` is the sum of the sizes before part i.
    private var starts: [Int64] = []
    /// The body position: the next byte `read` copies.
    private var position: Int64 = 0
    /// The part that holds `position` (or `parts.count` at the end).
    private var index = 0
    /// The total size, announced as `Content-Length` before anything is sent; -1 for a stream
    /// of unknown length (sent chunked).
    let count: Int64
    /// A streamed body's channel, read instead of parts (`Attempt+StreamedUpload.swift`).
    let stream: UploadChannel?

    init(_ body: Request.Body) throws(RequestError) {
        let segments: [Request.Body.Segment]
        switch body {
        case .bytes(let data): segments = [.bytes(data)]
        case .file(let url): segments = [.file(url)]
        case .segments(let list): segments = list
        case .stream(let body):
            stream = body.channel
            count = body.length ?? -1
            return
        }
        stream = nil
        var total: Int64 = 0
        for segment in segments {
            let part: Part
            switch segment {
            case .bytes(let data):
                part = .bytes(data)
            case .file(let url):
                // O_NONBLOCK: a FIFO with no writer opens at once instead of blocking the engine
                // thread until someone writes; fstat then refuses it with anything else that is
                // not a regular file (a device, a folder). Reads use `pread`, which a regular
                // file answers whether or not the flag is set.
                let fd = open(url.path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
                let openError = fd < 0 ? errno : 0
                var info = stat()
                guard fd >= 0, fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
                    // `deinit` does not run for an init that throws: close what is open.
                    if fd >= 0 { close(fd) }
                    for case .file(let open, _, _) in parts { close(open) }
                    parts = []
                    throw .invalidRequest("body file \(url.path) cannot be read: \(fd < 0 ? String(cString: strerror(openError)) : "not a regular file")")
                }
                part = .file(fd: fd, size: Int64(info.st_size), path: url.path)
            }
            starts.append(total)
            total += part.count
            parts.append(part)
        }
        count = total
    }

    deinit {
        for case .file(let fd, _, _) in parts { close(fd) }
    }

    /// Copies up to `buffer.count` bytes of the body; 0 at its end. Throws when a file cannot
    /// be read or ends before the size it had when the attempt began.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(RequestError) -> Int {
        // Skip parts that are done (empty ones included).
        while index < parts.count, position >= starts[index] + parts[index].count { index += 1 }
        guard index < parts.count, buffer.count > 0 else { return 0 }
        let offset = position - starts[index]
        let wanted = Int(min(Int64(buffer.count), parts[index].count - offset))
        switch parts[index] {
        case .bytes(let data):
            data.withUnsafeBytes { source in
                buffer.baseAddress!.copyMemory(from: source.baseAddress! + Int(offset), byteCount: wanted)
            }
            position += Int64(wanted)
            return wanted
        case .file(let fd, let size, let path):
            while true {
                let n = pread(fd, buffer.baseAddress, wanted, off_t(offset))
                if n < 0 && errno == EINTR { continue }
                if n < 0 {
                    throw .fileSystem("body file \(path) could not be read: \(String(cString: strerror(errno)))")
                }
                if n == 0 {
                    throw .fileSystem("body file \(path) shrank while it was being sent: it had \(size) bytes, it ended at \(offset)")
                }
                position += Int64(n)
                return n
            }
        }
    }

    /// Whether every byte of the body has been read (libcurl asks for no more once it has
    /// read as many as it announced).
    var isAtEnd: Bool { position >= count }

    /// Moves to `offset` from the start of the body; false when that is not possible.
    func seek(to offset: Int64) -> Bool {
        guard offset >= 0, offset <= count else { return false }
        position = offset
        index = 0
        return true
    }
}
