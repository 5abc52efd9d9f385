import CurlQueue
import CurlQueueDownloads
import Foundation

extension BatchRunner {
    /// `result` with its ``FileResult/errorKind`` (the one given, else what its outcome and
    /// status say) and the unfinished file that stays, for the JSON report.
    static func classified(_ result: FileResult, kind: FileResult.ErrorKind?, paths: JobPaths, job: Job) -> FileResult {
        var result = result
        switch result.outcome {
        case .downloaded, .skipped:
            result.errorKind = nil
        case .interrupted:
            result.errorKind = .interrupted
        case .failed:
            if let kind {
                result.errorKind = kind
            } else if let status = result.status, !(200..<300).contains(status) {
                result.errorKind = .http
            } else {
                result.errorKind = .file
            }
        }
        if result.outcome != .downloaded {
            let staged = paths.download(job)
            result.partialPath = [paths.part(job), staged].first { $0 != paths.final(job) && FileKind.size($0) != nil }
        }
        return result
    }
}

extension ErrorWords {
    /// The kind of a transfer's failure, for `--json`'s `errorKind`.
    static func kind(_ error: RequestError) -> FileResult.ErrorKind { DownloadFailureKind(error) }
}
