import CurlQueueDownloads
import Foundation

/// The human summary printed on standard error when a batch ends.
enum Summary {
    /// The full summary: counts, bytes, speed, folder, then every file that did not make it.
    static func text(_ report: BatchReport, colours: Bool = false) -> String {
        let downloaded = report.count(.downloaded)
        let skipped = report.count(.skipped)
        let failed = report.count(.failed)
        let stopped = report.count(.interrupted)
        var counts = ["\(downloaded) downloaded"]
        if skipped > 0 { counts.append("\(skipped) already there") }
        if failed > 0 { counts.append("\(failed) failed") }
        if stopped > 0 { counts.append("\(stopped) not finished") }
        let speed = report.seconds > 0 ? ", \(Format.speed(Double(report.bytesReceived) / report.seconds))" : ""
        let head = report.interruption.map { capitalized($0.description) + " after" } ?? "Done in"
        var text = "\(head) \(Format.duration(report.seconds)): \(counts.joined(separator: ", ")) of \(report.results.count) "
            + "file\(report.results.count == 1 ? "" : "s")\n"
            + "\(Format.bytes(report.bytesReceived)) received\(speed); folder \(Format.safe(report.directory.path))\n"
        let failures = report.results.filter { $0.outcome == .failed }
        if !failures.isEmpty {
            text += Terminal.paint("Failed:", .red, enabled: colours) + "\n"
            for result in failures { text += "  " + failureLine(result, in: report.directory) + "\n" }
        }
        let hooksFailed = report.results.filter { $0.hook?.succeeded == false }
        if !hooksFailed.isEmpty {
            text += Terminal.paint("--on-download-complete failed:", .red, enabled: colours) + "\n"
            for result in hooksFailed { text += "  " + hookLine(result, in: report.directory) + "\n" }
        }
        let unfinished = report.results.filter { $0.outcome == .interrupted }
        if !unfinished.isEmpty {
            let kept = unfinished.filter { $0.bytes > 0 }
            text += "Not finished: \(unfinished.count)"
            if !kept.isEmpty {
                let bytes = kept.reduce(Int64(0)) { $0 + $1.bytes }
                text += " (\(kept.count) with \(Format.bytes(bytes)) kept as .part files)"
            }
            text += ".\nRun the same command again to resume them"
            // A `.part` is resumed by default only with the validator kept with it (or, split, its ranges).
            let unchecked = unfinished.filter { result in
                guard let part = result.partialPath, part.hasSuffix(".part"), FileKind.size(part) ?? 0 > 0 else { return false }
                return !FileKind.hasPartValidator(part) && FileKind.of(SplitSidecar.path(forPart: part)) != .file
            }
            if !unchecked.isEmpty {
                text += "; \(unchecked.count) of them \(unchecked.count == 1 ? "has" : "have") no validator (no ETag or Last-Modified "
                    + "from the server) and will start over, unless -c resumes \(unchecked.count == 1 ? "it" : "them") unchecked"
            }
            text += ".\n"
        }
        return text
    }

    /// `--quiet`: only what went wrong, one line per file.
    static func quietText(_ report: BatchReport) -> String {
        report.results.filter { $0.outcome == .failed }.map { "curlq: failed: " + failureLine($0, in: report.directory) + "\n" }.joined()
            + report.results.filter { $0.hook?.succeeded == false }.map { "curlq: --on-download-complete: " + hookLine($0, in: report.directory) + "\n" }.joined()
    }

    static func hookLine(_ result: FileResult, in folder: URL) -> String {
        Format.safe("\(name(result, in: folder)): \(result.hook?.words ?? "")")
    }

    static func failureLine(_ result: FileResult, in folder: URL) -> String {
        Format.safe("\(name(result, in: folder)): \(result.error ?? "failed") (\(Format.url(result.url)))")
    }

    /// The file's path inside the output folder (`isos/a.iso` for a `dir=` file), as the
    /// progress lines name it.
    static func name(_ result: FileResult, in folder: URL) -> String {
        var prefix = folder.path
        if !prefix.hasSuffix("/") { prefix += "/" }
        return result.path.hasPrefix(prefix) ? String(result.path.dropFirst(prefix.count)) : (result.path as NSString).lastPathComponent
    }

    private static func capitalized(_ text: String) -> String {
        text.prefix(1).uppercased() + text.dropFirst()
    }
}
