#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension WorkerInfo {
    /// This machine's name (`gethostname`): the default ``node``, and how an SQLite store tells
    /// the workers whose lock files it can check.
    public static var localNode: String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
