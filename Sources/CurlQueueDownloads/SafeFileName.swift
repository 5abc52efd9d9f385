import CurlQueue
package import Foundation

/// Turns whatever a URL or an `out=` line says into a plain file name that stays inside the
/// output folder: no `/` (nor `\`), no `.` or `..` component, no leading `.` or `-`, no run of dots,
/// no control or invisible formatting characters, at most ``maxBytes`` bytes of UTF-8, and
/// `index.html` when nothing is left.
package enum SafeFileName {
    /// Leaves room under Linux's 255-byte NAME_MAX for `.part`, `.unverified` and `.N`.
    package static let maxBytes = 200
    package static let fallback = "index.html"

    /// The name for a URL: its last path segment as given (not after redirects),
    /// percent-decoded, then made safe. The query and fragment play no part.
    package static func from(url: URL) -> String {
        let path = URLComponents(url: url, resolvingAgainstBaseURL: false)?.percentEncodedPath ?? url.path
        return sanitize(TextEscaping.percentDecoded(lastSegment(ofPercentEncodedPath: path)))
    }

    /// The text after the last `/` of a still percent-encoded path (so `%2F` does not split).
    package static func lastSegment(ofPercentEncodedPath path: String) -> Substring {
        guard let slash = path.lastIndex(of: "/") else { return path[...] }
        return path[path.index(after: slash)...]
    }
    /// Makes `raw` (already decoded) safe to use as a file name in the output folder.
    ///
    /// `../../etc/passwd` becomes `etc_passwd`: the path is split at `/` and `\`, the empty,
    /// `.` and `..` components are dropped and the rest joined with `_`.
    package static func sanitize(_ raw: String) -> String {
        sanitizedName(raw) ?? fallback
    }

    /// As ``sanitize(_:)``, but nil where that gives ``fallback``: nothing usable was left.
    package static func sanitizedName(_ raw: String) -> String? {
        var cleaned = String.UnicodeScalarView()
        for scalar in raw.unicodeScalars {
            switch scalar.properties.generalCategory {
            case .control, .lineSeparator, .paragraphSeparator, .surrogate, .privateUse:
                cleaned.append("_")
            case .format:
                continue  // zero-width and bidirectional controls: invisible, and misleading
            default:
                cleaned.append(scalar)
            }
        }
        // Split on scalars, not characters: a combining mark after a `/` makes one character of
        // the two, which a split on characters would not see as a separator.
        let components = cleaned
            .split(whereSeparator: { $0 == "/" || $0 == "\\" })
            .map { String(String.UnicodeScalarView($0)).trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && $0 != "." && $0 != ".." }
        // Tidied again once cut: the cut may leave a dot where the stem meets the extension
        // (`a.` + `.bin`) or a space at the end.
        let name = tidied(truncated(tidied(components.joined(separator: "_"))))
        return name.isEmpty ? nil : name
    }

    /// No run of dots anywhere, no dot or space at the start, no space at the end, and a
    /// leading `-` as `_` (a name such as `-rf` would be an option to `rm *` or `ls *`).
    private static func tidied(_ text: String) -> String {
        var name = text
        while name.contains("..") { name = name.replacingOccurrences(of: "..", with: ".") }
        while let first = name.unicodeScalars.first, first == "." || first.properties.isWhitespace {
            name.unicodeScalars.removeFirst()
        }
        while let last = name.unicodeScalars.last, last.properties.isWhitespace {
            name.unicodeScalars.removeLast()
        }
        if name.unicodeScalars.first == "-" {
            name.unicodeScalars.replaceSubrange(name.unicodeScalars.startIndex..<name.unicodeScalars.index(after: name.unicodeScalars.startIndex), with: "_".unicodeScalars)
        }
        return name
    }

    /// At most ``maxBytes`` of UTF-8, keeping a short extension (16 bytes at most). Cut at a
    /// character boundary, except inside a character longer than what is left (a letter with
    /// hundreds of combining marks), which is cut between its scalars: the stem is never empty,
    /// so the name never becomes its extension alone (a hidden file).
    package static func truncated(_ name: String) -> String {
        guard name.utf8.count > maxBytes else { return name }
        var suffix = ""
        if let dot = name.lastIndex(of: "."), dot != name.startIndex, name[dot...].utf8.count <= 16 {
            suffix = String(name[dot...])
        }
        let budget = maxBytes - suffix.utf8.count
        var stem = String.UnicodeScalarView()
        var bytes = 0
        for character in name.dropLast(suffix.count) {
            let size = character.utf8.count
            if bytes + size <= budget {
                stem.append(contentsOf: character.unicodeScalars)
                bytes += size
                continue
            }
            for scalar in character.unicodeScalars {
                let width = UTF8.width(scalar)
                if bytes + width > budget { break }
                stem.append(scalar)
                bytes += width
            }
            break
        }
        return String(stem) + suffix
    }
}

/// Hands out the names of one batch so that no two files, nor their `.part` and
/// verification files, collide: the second `a.bin` becomes `a.bin.1`, the third `a.bin.2`.
package struct NameAllocator {
    private var used: Set<String> = []

    package init() {}

    /// The suffix of a download waiting for its sha256 check (see ``Job``).
    package static let unverifiedSuffix = ".unverified"

    /// The files a download named `name` may create in the output folder.
    package static func files(for name: String) -> [String] {
        [name, name + ".part", name + unverifiedSuffix, name + unverifiedSuffix + ".part"]
    }

    /// Returns `name`, or `name.N` with the smallest N that is still free, and takes it.
    package mutating func claim(_ name: String) -> String {
        var candidate = name
        var number = 0
        while Self.files(for: candidate).contains(where: used.contains) {
            number += 1
            candidate = "\(name).\(number)"
        }
        used.formUnion(Self.files(for: candidate))
        return candidate
    }
}
