import CurlQueueDownloads

/// The command line as a curl or aria2c user types it, looked at before ArgumentParser reads it,
/// so that a habit gets a message naming the habit and curlq's spelling:
///
/// - an option curlq does not have but curl or aria2c do (`--retry 3`, `-x 8`, `-C -`, `-m 60`)
///   is reported as that option, never as its value taken for a URL (`not a URL: '3'`);
/// - a negative number after an option that takes one (`-j -1`) is that option's value, checked
///   as any other (`--jobs must be 0 (no limit) or more, not -1`), not "Missing value";
/// - `-s` followed by something that is not a number is curl's `--silent`, not aria2c's split;
/// - a URL where a command is expected (`curlq https://…`) is pointed to `curlq get`.
enum CommandLineHabits {
    /// curl's and aria2c's options that curlq spells otherwise or does not have, with what to use.
    /// The key is the option as typed (no `=value`).
    static let foreign: [String: String] = [
        "--retry": "curl's --retry N is --retries N here",
        "--retry-delay": "the wait between retries is an exponential backoff (see --retries)",
        "--retry-max-time": "--max-file-time SECONDS bounds a file, its retries included",
        "--retry-all-errors": "network errors are retried by default; --retry-http CODES adds statuses",
        "--retry-connrefused": "a refused connection is retried by default (--retries)",
        "-m": "curl's -m/--max-time is --max-file-time SECONDS here (see also --stall-timeout)",
        "--max-time": "curl's --max-time is --max-file-time SECONDS here (see also --stall-timeout)",
        "-C": "a .part file is resumed by default; -c/--continue resumes one without a validator too",
        "--continue-at": "a .part file is resumed by default; -c/--continue resumes one without a validator too",
        "-x": "aria2c's -x N is -s/--split N here; for curl's -x PROXY, set http_proxy/https_proxy (see Proxies in docs/curlq.md)",
        "--proxy": "set http_proxy/https_proxy/no_proxy in the environment (see Proxies in docs/curlq.md)",
        "--max-connection-per-server": "aria2c's --max-connection-per-server N is -s/--split N here",
        "--max-concurrent-downloads": "aria2c's --max-concurrent-downloads N is -j/--jobs N here",
        "--max-overall-download-limit": "aria2c's --max-overall-download-limit is --max-overall-rate RATE here",
        "--max-download-limit": "aria2c's --max-download-limit is --limit-rate RATE here",
        "--timeout": "--stall-timeout SECONDS fails a transfer that stops moving; --max-file-time SECONDS bounds a whole file",
        "-Z": "curlq always downloads in parallel: -j/--jobs N sets how many at once",
        "--parallel": "curlq always downloads in parallel: -j/--jobs N sets how many at once",
        "--parallel-max": "curl's --parallel-max N is -j/--jobs N here",
        "--output-dir": "curl's --output-dir DIR is -d/--dir DIR here",
        "--create-dirs": "-d/--dir creates its folder when missing",
        "--silent": "curl's -s/--silent is -q/--quiet here",
        "-#": "curl's -#/--progress-bar is --progress bar here",
        "--progress-bar": "curl's --progress-bar is --progress bar here",
        "--max-redirs": "redirects are followed up to 10 (not an option)",
        "--input-file": "aria2c's --input-file FILE is -i/--input FILE here",
        "--compressed": "not offered: resume, split ranges and checksums work on the file's bytes as stored, which a compressed transfer would change (see docs/curlq.md)",
    ]

    /// The options of `curlq get` that take a value, as typed.
    static let takingValues: Set<String> = [
        "-i", "--input", "-d", "--dir", "-o", "--output", "--cacert", "--capath", "--pinnedpubkey", "-j", "--jobs",
        "--per-host", "--order", "--retries", "--retry-http", "--max-file-time", "--stall-timeout", "--connect-timeout",
        "--speed-limit", "--lowest-speed-limit", "--speed-time", "--limit-rate", "--max-overall-rate", "-s", "--split",
        "--session", "-H", "--header", "-A", "--user-agent", "-u", "--user", "--netrc-file", "-b", "--cookie",
        "--progress", "--progress-interval", "--checksum", "--on-download-complete",
    ]

    /// The subcommands of `curlq`, by name.
    static let commands: Set<String> = ["get", "demo", "daemon", "enqueue", "status", "cancel", "help"]

    /// `arguments` (without the program's name) as ArgumentParser should read them, or a usage
    /// error saying which habit went wrong and what to type.
    static func prepare(_ arguments: [String]) throws(UsageError) -> [String] {
        guard let first = arguments.first else { return arguments }
        if !first.hasPrefix("-"), !commands.contains(first), looksLikeURL(first) {
            let quotedURLs = arguments.filter { !$0.hasPrefix("-") }.map(shellQuoted).joined(separator: " ")
            throw UsageError("\(quoted(first)) is not a command: curlq downloads with its get command: curlq get \(quotedURLs)")
        }
        guard first == "get" else { return arguments }
        var result = [first]
        var index = 1
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if argument == "--" {  // the rest are URLs
                result += arguments[index - 1..<arguments.count]
                break
            }
            let name = argument.hasPrefix("--") ? String(argument.prefix { $0 != "=" }) : argument
            if let hint = foreign[name] {
                throw UsageError("unknown option \(quoted(name)): \(hint) (see curlq get --help)")
            }
            if argument.hasPrefix("-"), !argument.hasPrefix("--"), argument.count > 2, let hint = foreign[String(argument.prefix(2))],
               !takingValues.contains(String(argument.prefix(2))) {
                // `-x8`, `-C-`, `-m60`: a short option with its value stuck to it.
                throw UsageError("unknown option \(quoted(String(argument.prefix(2)))): \(hint) (see curlq get --help)")
            }
            if argument.hasPrefix("-"), argument.count > 1, index < arguments.count, !arguments[index].hasPrefix("-"),
               !takingValues.contains(name), Double(argument) == nil, !isKnown(name) {
                // Else its value would be taken for a URL: `not a URL: '3'`.
                throw UsageError("unknown option \(quoted(name)) (see curlq get --help)")
            }
            guard takingValues.contains(argument), index < arguments.count else {
                result.append(argument)
                continue
            }
            let value = arguments[index]
            index += 1  // a value is never read as an option of its own
            if argument == "-s", Double(value) == nil {
                throw UsageError("-s is -s/--split N here (aria2c's: N connections for each file), not curl's --silent, "
                    + "which is -q/--quiet; \(quoted(value)) is not a number")
            }
            if value.hasPrefix("-"), value.count > 1, Double(value) != nil {
                // `-j -1`: the value of the option, checked as any other, not "Missing value".
                result.append(argument.hasPrefix("--") ? "\(argument)=\(value)" : "\(long(argument))=\(value)")
            } else {
                result += [argument, value]
            }
        }
        return result
    }

    /// The options `curlq get --help` lists (so, every option it has, read from its definitions).
    static let known: Set<String> = {
        var names: Set<String> = []
        for line in GetCommand.helpMessage(columns: 1000).split(separator: "\n") {
            let text = line.drop { $0 == " " }
            guard text.hasPrefix("-") else { continue }
            // `-j, --jobs <N>   Transfers…`: the names before the description.
            let head = text.components(separatedBy: "  ").first ?? ""
            for word in head.split(whereSeparator: { $0 == " " || $0 == "," || $0 == "/" }) where word.hasPrefix("-") {
                names.insert(String(word.prefix { $0 != "<" && $0 != "=" }))
            }
        }
        return names
    }()

    /// Whether `name` is an option of `curlq get`, or short flags of it run together (`-qk`).
    static func isKnown(_ name: String) -> Bool {
        if known.contains(name) { return true }
        guard !name.hasPrefix("--"), name.count > 2 else { return false }
        return name.dropFirst().allSatisfy { known.contains("-\($0)") }
    }

    /// The long spelling of a short option that takes a value.
    private static func long(_ short: String) -> String {
        let names = ["-i": "--input", "-d": "--dir", "-o": "--output", "-j": "--jobs", "-s": "--split",
                     "-H": "--header", "-A": "--user-agent", "-u": "--user", "-b": "--cookie"]
        return names[short] ?? short
    }

    /// Something typed as a URL: a scheme and `://`, or a host with a dot and a path.
    static func looksLikeURL(_ text: String) -> Bool {
        if text.contains("://") { return true }
        guard let host = text.split(separator: "/", maxSplits: 1).first, text.contains("/") else { return false }
        return host.contains(".") || host.hasPrefix("localhost")
    }

    /// `text` quoted for a POSIX shell when it needs it.
    static func shellQuoted(_ text: String) -> String {
        let plain = text.unicodeScalars.allSatisfy {
            ($0.isASCII && ($0.properties.isAlphabetic || $0.properties.numericType != nil)) || "-_./:=@%+,".unicodeScalars.contains($0)
        }
        if plain, !text.isEmpty { return text }
        return "'" + text.replacingOccurrences(of: "'", with: "'\\''").filter { !$0.isASCII || $0.asciiValue! >= 0x20 } + "'"
    }
}
