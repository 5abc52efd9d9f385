import CurlQueue
import CurlQueueDownloads
import Foundation

/// `--json`: one JSON object on standard output, written file by file so that a batch of any
/// size is never held as one big string. Its schema (each field, the outcomes, the error kinds,
/// the version policy) is documented in docs/curlq.md, "The JSON report"; bump ``version``
/// when a field changes meaning or goes (adding a field does not bump it). Version 2: `failed`
/// no longer counts the files an interruption stopped (`unfinished` does).
///
/// ```json
/// {"version":2,"files":[{"url":"…","outcome":"downloaded","path":"…","status":200,"bytes":123,"sha256":"…",
///   "attempts":1,"seconds":0.25,"error":null}],
///  "downloaded":1,"resumed":0,"skipped":0,"failed":0,"unfinished":0,"interrupted":false,"seconds":0.3}
/// ```
enum JSONReport {
    static let version = 2

    static func write(_ report: BatchReport, to output: (String) -> Void) {
        output("{\"version\":\(version),\"files\":[")
        for (index, result) in report.results.enumerated() {
            output((index == 0 ? "\n" : ",\n") + object(result))
        }
        let resumed = report.results.reduce(0) { $0 + (outcome($1) == "resumed" ? 1 : 0) }
        output("\n],\"downloaded\":\(report.count(.downloaded)),\"resumed\":\(resumed),\"skipped\":\(report.count(.skipped))"
            + ",\"failed\":\(report.count(.failed)),\"unfinished\":\(report.count(.interrupted))"
            + ",\"interrupted\":\(report.interruption != nil),\"seconds\":\(number(report.seconds))}\n")
    }

    /// `downloaded`, `resumed` (a `.part` completed with a 206), `skipped`, `failed` or `interrupted`.
    static func outcome(_ result: FileResult) -> String {
        if result.outcome == .downloaded, result.status == 206 { return "resumed" }
        return result.outcome.rawValue
    }

    static func object(_ result: FileResult) -> String {
        var text = "{\"url\":\(string(result.url.absoluteString)),\"outcome\":\(string(outcome(result)))"
        if FileKind.size(result.path) != nil { text += ",\"path\":\(string(result.path))" }
        if result.nameFromServer { text += ",\"nameFromServer\":true" }  // -J: `path` has the server's name
        if let partial = result.partialPath, FileKind.size(partial) != nil { text += ",\"partialPath\":\(string(partial))" }
        text += ",\"status\":\(result.status.map(String.init) ?? "null"),\"bytes\":\(result.bytes)"
            + ",\"sha256\":\(result.sha256.map(string) ?? "null"),\"attempts\":\(result.attempts)"
            + ",\"seconds\":\(number(result.seconds)),\"error\":\(result.error.map(string) ?? "null")"
        switch result.outcome {
        case .downloaded: break
        case .skipped: text += ",\"reason\":\"already there\""
        case .failed, .interrupted: text += ",\"reason\":\(string(result.error ?? "failed"))"
        }
        if let kind = result.errorKind { text += ",\"errorKind\":\(string(kind.rawValue))" }
        if let mirrors = result.mirrors { text += ",\"mirrors\":" + object(mirrors) }
        if let hook = result.hook {
            let status = if case .exited(let code) = hook { String(code) } else { "null" }
            text += ",\"hook\":{\"ok\":\(hook.succeeded),\"exitStatus\":\(status),\"error\":\(hook.succeeded ? "null" : string(hook.words))}"
        }
        return text + "}"
    }

    /// `mirrors`, only for a file given with mirrors: `{"served":URL|null,"failed":[{"url":…,
    /// "error":…,"errorKind":…,"status":…|null}, …]}`, a failed entry per failed try, in order.
    static func object(_ mirrors: MirrorReport) -> String {
        let failed = mirrors.failures.map { failure in
            "{\"url\":\(string(failure.url.absoluteString)),\"error\":\(string(failure.reason))"
                + ",\"errorKind\":\(string(failure.kind.rawValue)),\"status\":\(failure.status.map(String.init) ?? "null")}"
        }
        return "{\"served\":\(mirrors.served.map { string($0.absoluteString) } ?? "null"),\"failed\":[\(failed.joined(separator: ","))]}"
    }

    /// A JSON string literal (``TextEscaping/jsonLiteral(_:)``).
    static func string(_ text: String) -> String { TextEscaping.jsonLiteral(text) }

    /// Seconds with millisecond precision, always a valid JSON number.
    static func number(_ value: Double) -> String {
        guard value.isFinite else { return "0" }
        return String(format: "%.3f", max(0, value))
    }
}
