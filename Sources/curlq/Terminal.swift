import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The few ANSI escape sequences the live display needs, written by hand: none of the Swift
/// packages on hand draws a redrawable multi-line area (Rainbow only colours text), and
/// these five sequences are supported by every terminal emulator in use (VT100 and later).
///
/// The display keeps the cursor at the start of the line below its area. A redraw moves up
/// over the area, clears and rewrites each line, and clears whatever is left below, all in
/// one `write(2)`, so the terminal never shows a half-drawn frame. Lines are cut to the
/// terminal's width minus one, so none wraps and the count of lines to move up over is exact.
enum Terminal {
    static let escape = "\u{1B}["
    static let hideCursor = escape + "?25l"
    static let showCursor = escape + "?25h"
    /// Clear the whole current line (the cursor stays in its column).
    static let clearLine = escape + "2K"
    /// Clear from the cursor to the end of the screen.
    static let clearBelow = escape + "J"

    static func up(_ lines: Int) -> String { lines > 0 ? escape + "\(lines)A" : "" }

    /// Whether a live display makes sense on `descriptor`: a terminal that is not `dumb`.
    static func isInteractive(_ descriptor: Int32) -> Bool {
        guard isatty(descriptor) == 1 else { return false }
        return ProcessInfo.processInfo.environment["TERM"].map { $0 != "dumb" } ?? true
    }

    /// Columns and rows of the terminal on `descriptor`, else `$COLUMNS`/`$LINES`, else 80×24.
    static func size(_ descriptor: Int32) -> (columns: Int, rows: Int) {
        var size = winsize()
        if ioctl(descriptor, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0, size.ws_row > 0 {
            return (Int(size.ws_col), Int(size.ws_row))
        }
        let environment = ProcessInfo.processInfo.environment
        let columns = environment["COLUMNS"].flatMap(Int.init).map { max(20, min($0, 1000)) } ?? 80
        let rows = environment["LINES"].flatMap(Int.init).map { max(5, min($0, 1000)) } ?? 24
        return (columns, rows)
    }

    /// Colours are used on a terminal unless `NO_COLOR` is set (https://no-color.org).
    static var coloursAllowed: Bool { ProcessInfo.processInfo.environment["NO_COLOR"] == nil }

    enum Colour: Int {
        case red = 31, green = 32, yellow = 33, dim = 2
    }

    static func paint(_ text: String, _ colour: Colour, enabled: Bool) -> String {
        enabled ? escape + "\(colour.rawValue)m" + text + escape + "0m" : text
    }

    /// The lines of the live area drawn last, to move back over them.
    struct LiveArea {
        private(set) var height = 0

        /// One write's worth of text: `log` lines printed for good above the area, then the
        /// area redrawn as `lines`.
        mutating func redraw(log: [String], lines: [String]) -> String {
            var text = "\r" + Terminal.up(height)
            // A log line may wrap onto rows of the old area: clear all of it first.
            if !log.isEmpty { text += Terminal.clearBelow }
            for line in log { text += Terminal.clearLine + line + "\n" }
            for line in lines { text += Terminal.clearLine + line + "\n" }
            text += Terminal.clearBelow
            height = lines.count
            return text
        }

        /// Erases the area, leaving the cursor where it began.
        mutating func erase() -> String {
            defer { height = 0 }
            return "\r" + Terminal.up(height) + Terminal.clearBelow
        }
    }
}
