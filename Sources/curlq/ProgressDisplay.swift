import ArgumentParser
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `--progress`.
enum ProgressMode: String, CaseIterable, ExpressibleByArgument, Sendable {
    /// `bar` when standard error is a terminal, else `lines`.
    case auto, bar, lines, none

    func resolved() -> ProgressMode {
        guard self == .auto else { return self }
        return Terminal.isInteractive(STDERR_FILENO) ? .bar : .lines
    }
}

/// Shows a batch as it runs, on standard error. Called only on ``BatchRunner``'s queue.
protocol ProgressDisplay: AnyObject {
    /// How often ``refresh(_:)`` wants calling, in seconds; nil for never.
    var refreshInterval: Double? { get }
    /// Whether the display hid the cursor (to be shown again if the process must exit at once).
    var usesTerminal: Bool { get }
    func started(_ index: Int, _ model: BatchModel)
    func retrying(_ index: Int, attempt: Int, delay: Double, _ model: BatchModel)
    func finished(_ index: Int, _ result: FileResult, _ model: BatchModel)
    func note(_ text: String, _ model: BatchModel)
    func refresh(_ model: BatchModel)
    func end(_ model: BatchModel)
    /// Ctrl-Z: give the terminal back (live area erased, cursor shown) before the process stops.
    func suspend()
    /// SIGCONT: draw again from scratch at the next refresh.
    func resume()
}

extension ProgressDisplay {
    var refreshInterval: Double? { nil }
    var usesTerminal: Bool { false }
    func refresh(_ model: BatchModel) {}
    func end(_ model: BatchModel) {}
    func suspend() {}
    func resume() {}

    /// A file the interruption stopped before it started: counted in one "N not started"
    /// note (``BatchRunner/interrupt(_:)``) rather than given a line of its own.
    func neverStarted(_ result: FileResult) -> Bool { result.outcome == .interrupted && result.startOrder == 0 }
}

/// `interval`: how often the `lines` display prints a line per running file (`--progress-interval`).
func makeDisplay(_ mode: ProgressMode, interval: Double = LineDisplay.defaultInterval) -> any ProgressDisplay {
    switch mode.resolved() {
    case .bar: return BarDisplay()
    case .lines: return LineDisplay(interval: interval)
    case .none, .auto: return SilentDisplay()
    }
}

/// `--progress none` and `--quiet`: nothing while the batch runs.
final class SilentDisplay: ProgressDisplay {
    func started(_ index: Int, _ model: BatchModel) {}
    func retrying(_ index: Int, attempt: Int, delay: Double, _ model: BatchModel) {}
    func finished(_ index: Int, _ result: FileResult, _ model: BatchModel) {}
    func note(_ text: String, _ model: BatchModel) {}
}

/// How the log lines of both displays describe a file.
enum ResultText {
    /// What becomes of the file's `.part`: resumed or started over, or nil when there is none.
    static func partFate(_ job: Job) -> String? {
        if job.resumeOffset > 0 { return "resuming after \(Format.bytes(job.resumeOffset))" }
        return job.discardedPart?.description
    }

    /// `, from mirror 2 of 3 (URL)` for a file given with mirrors.
    static func servedBy(_ result: FileResult) -> String {
        guard let mirrors = result.mirrors, let index = mirrors.servedIndex, let url = mirrors.served else { return "" }
        return ", from mirror \(index + 1) of \(mirrors.count) (\(Format.url(url)))"
    }

    static func detail(_ result: FileResult) -> String {
        let seconds = result.transferSeconds
        switch result.outcome {
        case .downloaded:
            let speed = seconds > 0 ? ", " + Format.speed(Double(result.fetched) / seconds) : ""
            let attempts = result.attempts > 1 ? ", \(result.attempts) attempts" : ""
            let resumed = result.fetched < result.bytes ? " (resumed: \(Format.bytes(result.fetched)) fetched)" : ""
            let serverName = result.nameFromServer ? "; saved as \(Format.safe((result.path as NSString).lastPathComponent)) (the server's name, -J)" : ""
            return "\(Format.bytes(result.bytes))\(resumed) in \(Format.duration(seconds))\(speed)\(attempts)\(serverName)\(servedBy(result))"
        case .skipped:
            return "already there (\(Format.bytes(result.bytes))); --overwrite replaces it"
        case .failed, .interrupted:
            return Format.safe(result.error ?? "failed")
        }
    }
}

/// Standard error is not a terminal: one plain line per started, retried and finished file,
/// and every `interval` seconds a `progress` line per running file (``RunningLines``), so that
/// a long download in a CI log does not look dead.
final class LineDisplay: ProgressDisplay {
    static let defaultInterval = 5.0
    let refreshInterval: Double?
    private var lastProgress = monotonicSeconds()

    /// `interval` 0: no progress lines.
    init(interval: Double = LineDisplay.defaultInterval) {
        refreshInterval = interval > 0 ? interval : nil
    }

    func refresh(_ model: BatchModel) {
        guard let interval = refreshInterval else { return }
        let now = monotonicSeconds()
        // The timer fires at once when the batch begins, and a tick may come a little early.
        guard now - lastProgress >= interval * 0.9 else { return }
        lastProgress = now
        let text = RunningLines.text(model, now: now)
        if !text.isEmpty { Output.error(text) }
    }

    private func line(_ word: String, _ name: String, _ detail: String) {
        let padded = word.padding(toLength: 8, withPad: " ", startingAt: 0)
        Output.error("\(padded) \(Format.safe(name))  \(detail)\n")
    }

    func started(_ index: Int, _ model: BatchModel) {
        let job = model.jobs[index]
        let mirrors = job.mirrors.isEmpty ? "" : " (+\(job.mirrors.count) mirror\(job.mirrors.count == 1 ? "" : "s"))"
        line("start", job.name, Format.url(job.url) + mirrors + (ResultText.partFate(job).map { " (\($0))" } ?? ""))
    }

    func retrying(_ index: Int, attempt: Int, delay: Double, _ model: BatchModel) {
        line("retry", model.jobs[index].name, RetryText.line(index, attempt: attempt, delay: delay, model))
    }

    func finished(_ index: Int, _ result: FileResult, _ model: BatchModel) {
        guard !neverStarted(result) else { return }
        let word: String
        switch result.outcome {
        case .downloaded: word = "done"
        case .skipped: word = "skipped"
        case .failed: word = "failed"
        case .interrupted: word = "stopped"
        }
        line(word, model.jobs[index].name, ResultText.detail(result) + "  [\(model.finished)/\(model.jobs.count)]")
    }

    func note(_ text: String, _ model: BatchModel) {
        Output.error("curlq: \(Format.safe(text))\n")
    }
}

/// Standard error is a terminal: a live area with one bar per running transfer and an
/// overall line, redrawn in place ten times a second; finished files, retries and notes are
/// printed once above it.
final class BarDisplay: ProgressDisplay {
    let refreshInterval: Double? = 0.1
    let usesTerminal = true
    private var area = Terminal.LiveArea()
    private var log: [String] = []
    private var began = false
    private var nameColumn: Int?
    private let colours = Terminal.coloursAllowed

    private func paint(_ text: String, _ colour: Terminal.Colour) -> String {
        Terminal.paint(text, colour, enabled: colours)
    }

    func started(_ index: Int, _ model: BatchModel) {
        let job = model.jobs[index]
        if let fate = ResultText.partFate(job) { log.append(paint("→", .dim) + " \(Format.safe(job.name))  \(fate)") }
    }

    func retrying(_ index: Int, attempt: Int, delay: Double, _ model: BatchModel) {
        log.append(paint("↻", .yellow) + " \(Format.safe(model.jobs[index].name))  " + RetryText.line(index, attempt: attempt, delay: delay, model))
    }

    func finished(_ index: Int, _ result: FileResult, _ model: BatchModel) {
        guard !neverStarted(result) else { return }
        let mark: String
        switch result.outcome {
        case .downloaded: mark = paint("✓", .green)
        case .skipped: mark = paint("=", .dim)
        case .failed: mark = paint("✗", .red)
        case .interrupted: mark = paint("‖", .yellow)
        }
        log.append("\(mark) \(Format.safe(model.jobs[index].name))  \(ResultText.detail(result))")
    }

    func note(_ text: String, _ model: BatchModel) {
        log.append(paint(Format.safe(text), .yellow))
    }

    func refresh(_ model: BatchModel) {
        var text = began ? "" : Terminal.hideCursor
        began = true
        let (columns, rows) = Terminal.size(STDERR_FILENO)
        text += area.redraw(log: log, lines: frame(model, columns: columns - 1, rows: rows))
        log.removeAll(keepingCapacity: true)
        Output.error(text)
    }

    func suspend() {
        guard began else { return }
        Output.error(area.erase() + Terminal.showCursor)
        began = false  // the next refresh hides the cursor again and draws a new area
    }

    func end(_ model: BatchModel) {
        var text = area.redraw(log: log, lines: [])
        log.removeAll()
        text += area.erase()
        if began { text += Terminal.showCursor }
        Output.error(text)
    }

    // MARK: Drawing

    /// The live area: a line per running file (as many as fit), then the overall line.
    func frame(_ model: BatchModel, columns: Int, rows: Int) -> [String] {
        let now = monotonicSeconds()
        let width = max(20, columns)
        let running = model.active.sorted { model.live[$0].startSequence < model.live[$1].startSequence }
        // At most rows - 1 lines (the cursor waits on the line below), the overall line included.
        let room = min(max(0, rows - 2), 40)
        var lines: [String] = []
        let shown = running.count > room ? max(0, room - 1) : running.count
        if nameColumn == nil {
            nameColumn = model.jobs.reduce(8) { max($0, Format.width($1.name)) }
        }
        let nameWidth = min(nameColumn ?? 8, 32, max(8, width / 4))
        for index in running.prefix(max(0, shown)) {
            lines.append(line(for: index, model, width: width, nameWidth: nameWidth, now: now))
        }
        if shown < running.count, room > 0 {
            lines.append(Format.fit("  … and \(running.count - shown) more under way", width))
        }
        lines.append(overall(model, width: width, now: now))
        return lines
    }

    private func line(for index: Int, _ model: BatchModel, width: Int, nameWidth: Int, now: Double) -> String {
        let live = model.live[index]
        let name = Format.fit(model.jobs[index].name, nameWidth, pad: true)
        switch live.phase {
        case .waitingToRetry(let attempt, let due):
            return Format.fit("\(name) " + RetryText.line(index, attempt: attempt, delay: max(0, due - now), model), width)
        case .verifying:
            return Format.fit("\(name) checking \(model.jobs[index].checksum?.algorithm.rawValue ?? "sha256")…", width)
        default:
            break
        }
        let speed = live.meter.bytesPerSecond(at: now)
        var fraction: Double?
        var sizes = Format.bytes(live.bytes)
        var eta = ""
        if let total = live.total, total > 0 {
            fraction = min(1, max(0, Double(live.bytes) / Double(total)))
            sizes += " / " + Format.bytes(total)
            if let speed, speed > 0 { eta = "ETA " + Format.duration(Double(max(0, total - live.bytes)) / speed) }
        }
        // Fixed-width columns, so that the bars line up and keep their length.
        let percent = fraction.map { Format.right("\(Int($0 * 100))%", 4) } ?? "    "
        let tail = "\(percent)  \(Format.right(sizes, 19))  \(Format.right(Format.speed(speed), 10))  \(Format.fit(eta, 10, pad: true))"
        let barWidth = min(40, width - nameWidth - 4 - Format.width(tail))
        guard barWidth >= 8 else {
            return Format.fit("\(name) \(percent) \(Format.speed(speed))", width)
        }
        return Format.fit("\(name) [\(bar(fraction, width: barWidth, now: now))] \(tail)", width)
    }

    /// A bar of `width` cells with eighth-cell precision; a sliding block when the size is unknown.
    private func bar(_ fraction: Double?, width: Int, now: Double) -> String {
        guard let fraction else {
            let position = Int(now * 8) % max(1, 2 * (width - 3))
            let start = position < width - 3 ? position : 2 * (width - 3) - position
            return String(repeating: " ", count: start) + "███" + String(repeating: " ", count: max(0, width - 3 - start))
        }
        let eighths = Int(fraction * Double(width * 8))
        let full = eighths / 8
        let partials = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"]
        var text = String(repeating: "█", count: full)
        if full < width {
            text += partials[eighths % 8]
            text += String(repeating: "·", count: width - full - (eighths % 8 == 0 ? 0 : 1))
        }
        return text
    }

    private func overall(_ model: BatchModel, width: Int, now: Double) -> String {
        var files = "\(model.finished) of \(model.jobs.count) files"
        var states: [String] = []
        let failed = "\(model.failed) failed"
        if model.failed > 0 { states.append(failed) }
        if model.skipped > 0 { states.append("\(model.skipped) skipped") }
        if !states.isEmpty { files += " (" + states.joined(separator: ", ") + ")" }
        let plain = [
            files, Format.bytes(model.received), Format.speed(model.meter.bytesPerSecond(at: now)),
            "\(model.active.count) under way, \(model.queued) queued", Format.duration(now - model.startedAt),
        ].joined(separator: " · ")
        // Fit the plain text first: colour codes take no columns but do take characters.
        guard Format.width(plain) <= width else { return Format.fit(plain, width) }
        return model.failed > 0 ? plain.replacingOccurrences(of: failed, with: paint(failed, .red)) : plain
    }
}
