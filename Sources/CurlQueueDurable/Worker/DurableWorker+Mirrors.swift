import CCurl  // <sys/xattr.h>: the source mark a .part keeps
import CurlQueue
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension DurableWorker {
    /// For a job with mirrors, `curlq get`'s rule on a `.part` another server wrote: its
    /// `If-Range` would prove nothing here (a strong ETag is one server's name for one version;
    /// two servers' `Last-Modified` may agree for different bytes). With a checksum the `.part`
    /// is resumed without its validator and the whole file is hashed; without one it is
    /// removed and the file comes whole. The request marks the `.part` with its URL whenever it
    /// opens it (``PartFileAttribute/source``); an unmarked `.part` is the first URL's.
    static func keepPartOnlyFromItsServer(_ request: inout Request, job: JobRecord) {
        guard job.spec.request.urls.count > 1, let destination = request.destination else { return }
        let url = request.url.absoluteString
        request.partFileSource = url
        guard request.resume else { return }
        let part = destination.path + ".part"
        var info = stat()
        guard lstat(part, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return }
        let first = URL(string: job.spec.request.url)?.absoluteString
        guard (partSource(part) ?? first) != url else { return }
        if job.spec.request.checksum != nil {
            _ = lremovexattr(part, PartFileAttribute.validator)
        } else {
            unlink(part)
        }
    }

    /// The URL the `.part` at `path` is marked with, if any.
    static func partSource(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 70 * 1024)
        let count = lgetxattr(path, PartFileAttribute.source, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
