package import CurlQueue
package import Foundation

/// The priority of one URL in the batch (`priority=` in an input file).
package enum InputPriority: String, CaseIterable, Sendable {
    case high, normal, low
}

/// One header field given with `-H` or `header=`.
package struct HeaderField: Equatable, Sendable {
    package var name: String
    package var value: String

    package init(name: String, value: String) {
        self.name = name
        self.value = value
    }

    /// Parses `Name: value`. The name must be an HTTP token (letters, digits and
    /// ``!#$%&'*+-.^_`|~``), the value may not hold control characters other than tab;
    /// spaces and tabs around the value are dropped. An empty value is allowed.
    package static func parse(_ text: String) -> Result<HeaderField, InputProblem> {
        guard let colon = text.firstIndex(of: ":") else {
            return .failure(InputProblem("a header must look like 'Name: value', not \(quoted(text))"))
        }
        let name = String(text[..<colon])
        guard !name.isEmpty, name.unicodeScalars.allSatisfy(isTokenCharacter) else {
            return .failure(InputProblem("invalid header name \(quoted(name)) (letters, digits and !#$%&'*+-.^_`|~ only)"))
        }
        let value = String(text[text.index(after: colon)...]).trimmingCharacters(in: CharacterSet(charactersIn: " \t"))
        if value.unicodeScalars.contains(where: { $0 != "\t" && ($0.value < 0x20 || $0.value == 0x7F) }) {
            return .failure(InputProblem("header \(name) has a control character (CR, LF, NUL…) in its value"))
        }
        return .success(HeaderField(name: name, value: value))
    }

    package static func isTokenCharacter(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar {
        case "a"..."z", "A"..."Z", "0"..."9": return true
        default: return "!#$%&'*+-.^_`|~".unicodeScalars.contains(scalar)
        }
    }

    /// `-H` headers apply to every URL; an entry's own `header=` lines add to them, and
    /// replace every `-H` header of the same name (compared case-insensitively).
    package static func merge(global: [HeaderField], own: [HeaderField]) -> [HeaderField] {
        let overridden = Set(own.map { $0.name.lowercased() })
        return global.filter { !overridden.contains($0.name.lowercased()) } + own
    }
}

/// What is wrong with a piece of input; the caller adds where it was (file and line).
package struct InputProblem: Error, Equatable, CustomStringConvertible {
    package var message: String
    package init(_ message: String) { self.message = message }
    package var description: String { message }
}

/// A malformed line of an input file.
package struct InputFileError: Error, Equatable, CustomStringConvertible {
    /// 1-based.
    package var line: Int
    package var message: String

    package init(line: Int, message: String) {
        self.line = line
        self.message = message
    }
    package var description: String { "line \(line): \(message)" }
}

/// One URL to download, with its options.
package struct InputEntry: Equatable, Sendable {
    package var url: URL
    /// Where it came from, for messages: `urls.txt:12` or `argument 3`.
    package var origin: String
    /// `out=`: the file name wanted in the output folder (made safe later).
    package var out: String?
    /// `dir=` (aria2's key): the folder inside the output folder the file goes to, as
    /// `sub/folder` (checked by ``InputFile/folder(_:)``); nil for the output folder itself.
    package var dir: String?
    package var priority: InputPriority = .normal
    /// `sha256=`, `sha512=`, `sha1=` or `md5=`: the expected digest.
    package var checksum: Checksum?
    /// `header=` lines, in order.
    package var headers: [HeaderField] = []
    /// `max-download-limit=` (aria2's key): this file's own receive rate, bytes per second,
    /// in place of `--limit-rate`.
    package var maxBytesPerSecond: Int64?
    /// Other URLs of the same file (mirrors), tried in order after `url` when it fails in a way
    /// another server could fix: the rest of a line of TAB-separated URLs, as aria2c's input
    /// file. Empty for a line of one URL (and always for a command-line argument).
    package var mirrors: [URL] = []

    package init(url: URL, origin: String, out: String? = nil, priority: InputPriority = .normal, mirrors: [URL] = []) {
        self.url = url
        self.origin = origin
        self.out = out
        self.priority = priority
        self.mirrors = mirrors
    }

    /// `url` then its mirrors.
    package var urls: [URL] { [url] + mirrors }
}

/// The input file format:
///
/// ```
/// # a comment
/// https://example.org/big.iso
///     out=ubuntu.iso
///     dir=isos/ubuntu
///     priority=high
///     sha256=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
///     header=Authorization: Bearer abc
/// https://example.org/other.bin
/// https://a.example.org/x.iso<TAB>https://b.example.net/pub/x.iso
/// ```
///
/// A URL line may hold several URLs separated by tabs: mirrors of one file, the first naming
/// it (unless `out=` does); the option lines below apply to all of them. A line that starts with a space or a tab belongs to the URL above it. Blank lines and lines
/// whose first non-blank character is `#` are skipped. Parsing is pure: no I/O.
package enum InputFile {
    package static let keys = ["out", "dir", "priority", "sha256", "sha512", "sha1", "md5", "checksum", "header", "max-download-limit"]
    /// The most URLs one line may hold (a URL and its mirrors).
    package static let maxMirrors = 64

    /// Parses a whole file (already read). `origin` names it in the entries (`urls.txt`).
    /// Throws the first bad line; ``parseAll(_:origin:)`` reports every one.
    package static func parse(_ data: Data, origin: String) throws(InputFileError) -> [InputEntry] {
        let (entries, problems) = parseAll(data, origin: origin)
        if let first = problems.first { throw first }
        return entries
    }

    /// Parses a whole file (already read): the entries of its good lines, and every bad line
    /// (a URL line that is bad takes its option lines with it, unchecked).
    package static func parseAll(_ data: Data, origin: String) -> (entries: [InputEntry], problems: [InputFileError]) {
        var problems: [InputFileError] = []
        /// Set after a bad URL line: its option lines belong to it and are skipped.
        var skippingOptions = false
        var entries: [InputEntry] = []
        var bytes = data[...]
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }  // a UTF-8 BOM
        var lineNumber = 0
        var current: InputEntry?
        var seenKeys: Set<String> = []
        for rawLine in bytes.split(separator: 0x0A, omittingEmptySubsequences: false) {
            lineNumber += 1
            let lineBytes = rawLine.last == 0x0D ? rawLine.dropLast() : rawLine
            let line = String(decoding: lineBytes, as: UTF8.self)
            let trimmed = line.trimmingCharacters(in: CharacterSet(charactersIn: " \t"))
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            func fail(_ message: String) -> InputFileError { InputFileError(line: lineNumber, message: message) }

            if line.first == " " || line.first == "\t" {
                if skippingOptions { continue }
                guard var entry = current else {
                    problems.append(fail("an indented option line must follow a URL: \(quoted(trimmed))"))
                    continue
                }
                guard let equals = trimmed.firstIndex(of: "=") else {
                    problems.append(fail("expected key=value (\(keys.joined(separator: ", "))), not \(quoted(trimmed))"))
                    continue
                }
                let key = trimmed[..<equals].trimmingCharacters(in: CharacterSet(charactersIn: " \t")).lowercased()
                let value = trimmed[trimmed.index(after: equals)...].trimmingCharacters(in: CharacterSet(charactersIn: " \t"))
                do {
                    try apply(key: key, value: value, to: &entry, seen: &seenKeys)
                } catch {
                    problems.append(fail(error.message))
                    continue
                }
                current = entry
            } else {
                if let entry = current { entries.append(entry) }
                current = nil
                skippingOptions = true  // until this line's URLs are found good
                func report(_ message: String) -> InputFileError? {
                    problems.append(InputFileError(line: lineNumber, message: message))
                    return nil
                }
                // A tab between URLs: mirrors of one file (aria2c's format). Nothing else
                // separates them: a space in a URL stays the error it always was.
                let fields = trimmed.split(separator: "\t", omittingEmptySubsequences: true).map {
                    $0.trimmingCharacters(in: CharacterSet(charactersIn: " "))
                }
                guard fields.count <= maxMirrors else {
                    _ = report("more than \(maxMirrors) URLs (mirrors) on one line")
                    continue
                }
                var urls: [URL] = []
                var good = true
                for field in fields where good {
                    switch validateURL(field) {
                    case .success(let url):
                        if urls.contains(url) {
                            good = report("the same URL is given twice on one line: \(quoted(field))") != nil
                        } else {
                            urls.append(url)
                        }
                    case .failure(let problem):
                        good = report(fields.count > 1 ? "mirror \(urls.count + 1): \(problem.message)" : problem.message) != nil
                    }
                }
                guard good else { continue }
                skippingOptions = false
                current = InputEntry(url: urls[0], origin: "\(origin):\(lineNumber)", mirrors: Array(urls.dropFirst()))
                seenKeys = []
            }
        }
        if let entry = current { entries.append(entry) }
        return (entries, problems)
    }

    private static func apply(key: String, value: String, to entry: inout InputEntry, seen: inout Set<String>) throws(InputProblem) {
        if key != "header" {
            guard seen.insert(key).inserted || !keys.contains(key) else {
                throw InputProblem("\(key)= is given twice for this URL")
            }
        }
        switch key {
        case "out":
            guard !value.isEmpty else { throw InputProblem("out= needs a file name") }
            entry.out = value
        case "dir":
            entry.dir = try folder(value)
        case "priority":
            guard let priority = InputPriority(rawValue: value.lowercased()) else {
                throw InputProblem("priority must be high, normal or low, not \(quoted(value))")
            }
            entry.priority = priority
        case "sha256", "sha512", "sha1", "md5", "checksum":
            // aria2's spelling too: checksum=sha-256=HEX (sha-1, sha-512, md5; with or without the dash).
            let (name, digest) = key == "checksum" ? try splitChecksum(value) : (key, value)
            guard let algorithm = DigestAlgorithm(rawValue: name) else {
                throw InputProblem("checksum= takes ALGORITHM=HEX with sha-256, sha-512, sha-1 or md5, not \(quoted(value))")
            }
            if let other = entry.checksum {
                throw InputProblem("\(key == "checksum" ? "checksum=" : key + "=") and \(other.algorithm.rawValue)= are both given for this URL: give one checksum")
            }
            entry.checksum = Checksum(algorithm: algorithm, hex: try parseDigest(digest, algorithm))
        case "max-download-limit":
            guard let rate = Rate.parse(value) else {
                throw InputProblem("max-download-limit= takes bytes per second, as 500K, 2M or 1G (K = 1024), not \(quoted(value))")
            }
            entry.maxBytesPerSecond = rate
        case "header":
            switch HeaderField.parse(value) {
            case .success(let field): entry.headers.append(field)
            case .failure(let problem): throw problem
            }
        default:
            throw InputProblem("unknown key \(quoted(key)) (expected \(keys.joined(separator: ", ")))")
        }
    }

    /// A `dir=` value: a folder inside the output folder, its components joined by `/` (nil for
    /// `.`, the output folder). Never absolute, never `..`, and each component a name that
    /// ``SafeFileName`` leaves as it is (no leading `.` or `-`, no run of dots, no `\` or
    /// control character): the one check of a `dir=` for get, enqueue and the daemon.
    package static func folder(_ value: String) throws(InputProblem) -> String? {
        guard !value.isEmpty else { throw InputProblem("dir= needs a folder, as sub/folder") }
        guard !value.hasPrefix("/") && !value.hasPrefix("~") else {
            throw InputProblem("dir= takes a folder inside the output folder, as sub/folder, not \(quoted(value)): every download stays inside it")
        }
        let parts = value.split(separator: "/").filter { $0 != "." }
        for part in parts {
            if part == ".." {
                throw InputProblem("dir= may not leave the output folder (..): \(quoted(value))")
            }
            guard SafeFileName.sanitizedName(String(part)) == String(part) else {
                throw InputProblem("dir=: \(quoted(part)) is not a folder name curlq writes (no leading . or -, no run of dots, no \\ or control character)")
            }
        }
        guard parts.count <= 32 else { throw InputProblem("dir= is more than 32 folders deep: \(quoted(value))") }
        return parts.isEmpty ? nil : parts.joined(separator: "/")
    }

    /// aria2's `checksum=` value `sha-256=HEX`: the algorithm's name as ``DigestAlgorithm``
    /// spells it (dashes dropped, lower case) and the digits.
    package static func splitChecksum(_ value: String) throws(InputProblem) -> (String, String) {
        guard let equals = value.firstIndex(of: "=") else {
            throw InputProblem("checksum= takes ALGORITHM=HEX (as aria2's checksum=sha-256=…), not \(quoted(value))")
        }
        let name = value[..<equals].lowercased().replacingOccurrences(of: "-", with: "")
        return (name, String(value[value.index(after: equals)...]))
    }

    /// The digest's hexadecimal digits (64 for sha256), returned in lowercase.
    package static func parseDigest(_ value: String, _ algorithm: DigestAlgorithm) throws(InputProblem) -> String {
        let length = algorithm.hexLength
        guard value.utf8.count == length, value.unicodeScalars.allSatisfy(\.properties.isASCIIHexDigit) else {
            throw InputProblem("\(algorithm.rawValue)= needs \(length) hexadecimal digits, not \(quoted(value))")
        }
        return value.lowercased()
    }

    /// An absolute http or https URL with a host, written without spaces or control
    /// characters (percent-encode them).
    package static func validateURL(_ text: String) -> Result<URL, InputProblem> {
        if text.utf8.count > maxURLBytes {
            return .failure(InputProblem("the URL is longer than \(maxURLBytes / 1024) KiB: \(quoted(text))"))
        }
        if text.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7F }) {
            return .failure(InputProblem("not a URL (spaces and control characters must be percent-encoded): \(quoted(text))"))
        }
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased() else {
            return .failure(InputProblem("not a URL: \(quoted(text))" + schemeHint(text)))
        }
        guard scheme == "http" || scheme == "https" else {
            if !text.contains("://"), let hint = Optional(schemeHint(text)), !hint.isEmpty {  // `localhost:8080/x`
                return .failure(InputProblem("not a URL: \(quoted(text))" + hint))
            }
            return .failure(InputProblem("only http and https URLs are supported: \(quoted(text))"))
        }
        guard let host = url.host, !host.isEmpty else {
            return .failure(InputProblem("the URL has no host: \(quoted(text))"))
        }
        if let port = url.port, !(1...65535).contains(port) {
            return .failure(InputProblem("the port must be 1 to 65535: \(quoted(text))"))
        }
        return .success(url)
    }

    /// For a host and path typed without a scheme (`example.org/a.iso`, `localhost:8080/x`): the
    /// URL meant, as a hint (curl guesses http; curlq does not guess, and says what to type).
    package static func schemeHint(_ text: String) -> String {
        guard !text.contains("://"), !text.hasPrefix("/") else { return "" }
        let authority = text.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let host = authority.split(separator: ":", maxSplits: 1).first ?? ""
        let port = authority.split(separator: ":", maxSplits: 1).dropFirst().first
        guard host == "localhost" || (host.contains(".") && !host.hasPrefix(".") && !host.hasSuffix(".")),
              host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == ".") }),
              port.map({ !$0.isEmpty && $0.allSatisfy(\.isNumber) }) ?? true
        else { return "" }
        return "; a URL needs its scheme: \(quoted("https://" + text)) (or http://)"
    }

    /// The longest URL taken, in bytes: far past any server's limit (8 KiB is common), and
    /// short enough for libcurl, which refuses a URL of some megabytes only once it runs.
    package static let maxURLBytes = 64 * 1024
}

/// `text` in single quotes, with control characters escaped, for messages.
package func quoted(_ text: some StringProtocol) -> String {
    var result = "'"
    for scalar in text.unicodeScalars.prefix(200) {
        if scalar.value < 0x20 || scalar.value == 0x7F || (0x80...0x9F).contains(scalar.value) {
            result += "\\u{\(String(scalar.value, radix: 16))}"
        } else {
            result.unicodeScalars.append(scalar)
        }
    }
    if text.unicodeScalars.count > 200 { result += "…" }
    return result + "'"
}

/// An expected digest of a file (`sha256=`, `sha512=`, `sha1=` or `md5=` in the input file).
///
/// The transfer computes it as the bytes are written (``Request/fileDigests``, with OpenSSL's
/// libcrypto); only a file whose first bytes were not written by this transfer (a resumed
/// `.part`, a file already there) is hashed from disk.
package struct Checksum: Equatable, Sendable {
    package var algorithm: DigestAlgorithm
    /// Lowercase hex.
    package var hex: String

    package init(algorithm: DigestAlgorithm, hex: String) {
        self.algorithm = algorithm
        self.hex = hex
    }
}
