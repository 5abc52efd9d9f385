import Foundation

/// `--json`: one JSON object on standard output, written file by file so that a batch of any
/// size is never held as one big string:
///
/// ```json
/// {"files":[{"url":"…","path":"…","status":200,"bytes":123,"sha256":"…","attempts":1,"seconds":0.25,"error":null}],
///  "downloaded":1,"skipped":0,"failed":0,"interrupted":false,"seconds":0.3}
/// ```
enum JSONReport {
    static func write(_ report: BatchReport, to output: (String) -> Void) {
        output("{\"files\":[")
        for (index, result) in report.results.enumerated() {
            output((index == 0 ? "\n" : ",\n") + object(result))
        }
        output("\n],\"downloaded\":\(report.count(.downloaded)),\"skipped\":\(report.count(.skipped))"
            + ",\"failed\":\(report.count(.failed) + report.count(.interrupted))"
            + ",\"interrupted\":\(report.interruption != nil),\"seconds\":\(number(report.seconds))}\n")
    }

    static func object(_ result: FileResult) -> String {
        "{\"url\":\(string(result.url.absoluteString)),\"path\":\(string(result.path))"
            + ",\"status\":\(result.status.map(String.init) ?? "null"),\"bytes\":\(result.bytes)"
            + ",\"sha256\":\(result.sha256.map(string) ?? "null"),\"attempts\":\(result.attempts)"
            + ",\"seconds\":\(number(result.seconds)),\"error\":\(result.error.map(string) ?? "null")}"
    }

    /// A JSON string literal: quotes, backslashes and control characters escaped.
    static func string(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x2028 || scalar.value == 0x2029:
                let hex = String(scalar.value, radix: 16)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default:
                result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }

    /// Seconds with millisecond precision, always a valid JSON number.
    static func number(_ value: Double) -> String {
        guard value.isFinite else { return "0" }
        return String(format: "%.3f", max(0, value))
    }
}
