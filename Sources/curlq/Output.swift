import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Writes to standard output and standard error with plain `write(2)` calls: one call per
/// message, so that a frame of the live display or a line of the log reaches the terminal
/// whole, and nothing is buffered when the process exits.
enum Output {
    static func standardOutput(_ text: String) { write(text, to: STDOUT_FILENO) }
    static func error(_ text: String) { write(text, to: STDERR_FILENO) }

    /// Writes all of `text`; a closed or broken stream is ignored (SIGPIPE is ignored too).
    static func write(_ text: String, to descriptor: Int32) {
        var text = text
        text.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = Glibc.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 {
                    if errno == EINTR || errno == EAGAIN { continue }
                    return
                }
                offset += written
            }
        }
    }
}
