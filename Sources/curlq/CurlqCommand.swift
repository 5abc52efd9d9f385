import ArgumentParser
import Foundation

/// The `curlq` executable: `curlq get` downloads a batch, `curlq demo` shows it off.
@main
struct Curlq: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "curlq",
        abstract: "Download many files at once over HTTP(S), with retries, resume and a live display.",
        discussion: """
            EXAMPLES:
              curlq get -d downloads https://example.org/a.iso https://example.org/b.iso
              curlq get -i urls.txt -d downloads -j 8 --per-host 2 --retries 3
              curlq get -i urls.txt -d downloads           # again after Ctrl-C: resumes
              cat urls.txt | curlq get -i - --json > report.json
              curlq demo                                   # no network needed

            Input file: one URL per line; '#' comments and blank lines are skipped; indented \
            key=value lines after a URL set out=NAME, priority=high|normal|low, sha256=HEX (or sha512=, sha1=, md5=) and \
            header=Name: value (repeatable).

            Exit status: 0 all downloaded or already there, 1 some failed, 2 usage error, \
            130 interrupted (SIGINT), 143 terminated (SIGTERM). Manual: docs/curlq.md.
            """,
        version: VersionText.full,
        subcommands: [GetCommand.self, DemoCommand.self, DaemonCommand.self, EnqueueCommand.self, StatusCommand.self, CancelCommand.self]
    )

    /// Like ArgumentParser's own `main`, except that every usage error exits with status 2
    /// (ArgumentParser's default is 64), and a command's `ExitCode` passes through untouched.
    static func main() async {
        // A reader that goes away (`curlq … | head`) must not kill the process mid-batch.
        signal(SIGPIPE, SIG_IGN)
        PeakMemoryReport.installIfRequested()
        do {
            // curl's and aria2c's habits get a message of their own first (CommandLineHabits.swift).
            var command = try await asyncParseAsRoot(try CommandLineHabits.prepare(Array(CommandLine.arguments.dropFirst())))
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let code as ExitCode {
            Foundation.exit(code.rawValue)
        } catch let failure as StoreFailure {
            Output.error("curlq: error: \(failure.message)\n")
            Foundation.exit(ExitStatus.someFailed)
        } catch let error as UsageError {
            Output.error("curlq: error: \(error.message)\n")
            Foundation.exit(ExitStatus.usage)
        } catch {
            if exitCode(for: error) == .success {  // --help, --version
                Output.standardOutput(fullMessage(for: error) + "\n")
                Foundation.exit(0)
            }
            Output.error(fullMessage(for: error) + "\n")
            Foundation.exit(ExitStatus.usage)
        }
    }
}

/// The exit statuses of `curlq`.
enum ExitStatus {
    static let success: Int32 = 0
    static let someFailed: Int32 = 1
    static let usage: Int32 = 2

    /// 128 + the signal number: 130 for SIGINT, 143 for SIGTERM.
    static func interrupted(by signal: Int32) -> Int32 { 128 + signal }
}

/// A mistake in the command line or the input, found before any transfer starts (exit 2).
struct UsageError: Error, CustomStringConvertible {
    var message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
}
