import CurlQueueTestHelpers
@testable import curlq
import CurlQueueDownloads
import Foundation
import Testing

/// `-J`: the file name a `Content-Disposition` field proposes (RFC 6266, RFC 8187), made safe
/// exactly as a URL's name is. The parser is a pure function: a table of friendly and hostile
/// fields, then random ones (FuzzContentDisposition does the same with coverage).
@Suite struct CurlqContentDispositionTests {
    /// What every name the parser hands out must be, whatever the field said: checked on
    /// Unicode scalars, so that a separator a combining mark follows is still seen.
    static func expectSafe(_ name: String?, _ field: String, sourceLocation: SourceLocation = #_sourceLocation) {
        guard let name else { return }
        let scalars = name.unicodeScalars
        #expect(!name.isEmpty, sourceLocation: sourceLocation)
        #expect(!scalars.contains("/") && !scalars.contains("\\"), "\(field.debugDescription) → \(name.debugDescription)", sourceLocation: sourceLocation)
        #expect(name != "." && name != "..", "\(field.debugDescription) → \(name.debugDescription)", sourceLocation: sourceLocation)
        #expect(scalars.first != "." && scalars.first != "-", "\(field.debugDescription) → \(name.debugDescription)", sourceLocation: sourceLocation)
        #expect(!scalars.contains { $0.properties.generalCategory == .control }, "\(field.debugDescription)", sourceLocation: sourceLocation)
        #expect(name.utf8.count <= SafeFileName.maxBytes, "\(field.debugDescription)", sourceLocation: sourceLocation)
    }

    /// Field → the safe name (nil: none usable, the URL's name stays).
    static let table: [(field: String, name: String?)] = [
        // RFC 6266's examples and the common forms.
        ("attachment; filename=example.html", "example.html"),
        ("attachment; filename=\"report 2024.pdf\"", "report 2024.pdf"),
        ("INLINE; FILENAME= \"an example.html\"", "an example.html"),
        ("attachment; filename*= UTF-8''%e2%82%ac%20rates", "€ rates"),
        ("attachment; filename=\"EURO rates\"; filename*=utf-8''%e2%82%ac%20rates", "€ rates"),  // filename* wins
        ("attachment; filename*=utf-8''%e2%82%ac%20rates; filename=\"EURO rates\"", "€ rates"),  // in either order
        ("attachment; filename*=iso-8859-1'en'%A3%20rates", "£ rates"),
        ("attachment; filename*=UTF-8'de'na%C3%AFve.txt", "naïve.txt"),
        ("attachment; filename=\"a \\\"quoted\\\" name\"", "a \"quoted\" name"),  // quoted-pairs undone
        ("attachment; filename=plain%20percent.txt", "plain%20percent.txt"),  // not decoded in filename
        ("attachment;filename=first.txt;filename=second.txt", "first.txt"),
        ("attachment; filename=\"unterminated.txt", "unterminated.txt"),
        ("attachment; filename=\"x.txt\" junk; size=3", "x.txt"),
        ("filename=no-type.bin", "no-type.bin"),
        ("attachment; name=\"field\"; filename=\"data.csv\"", "data.csv"),
        ("attachment; filename=spaces in token.bin ", "spaces in token.bin"),
        // filename* that cannot be decoded: the plain filename, else none.
        ("attachment; filename*=UTF-8''%FF%FE.txt; filename=fallback.txt", "fallback.txt"),  // invalid UTF-8
        ("attachment; filename*=koi8-r''%C1.txt; filename=fallback.txt", "fallback.txt"),  // unknown charset
        ("attachment; filename*=no-apostrophes.txt", nil),
        // No name at all.
        ("attachment", nil),
        ("inline", nil),
        ("", nil),
        ("attachment; filename=", nil),
        ("attachment; filename=\"\"", nil),
        ("attachment; filename*=UTF-8''", nil),
        ("attachment; filename", nil),
        (";;;=;=\"", nil),
        // Hostile: only the base name, made safe; never outside the folder.
        ("attachment; filename=\"../../etc/passwd\"", "passwd"),
        ("attachment; filename=\"/abs\"", "abs"),
        ("attachment; filename=/etc/", nil),
        ("attachment; filename*=UTF-8''%2e%2e%2fx", "x"),
        ("attachment; filename*=UTF-8''%2e%2e%2f%2e%2e%2f", nil),
        ("attachment; filename=\"..\\\\..\\\\windows\\\\win.ini\"", "win.ini"),
        ("attachment; filename=\"C:\\\\Users\\\\x\\\\evil.exe\"", "evil.exe"),
        ("attachment; filename=.", nil),
        ("attachment; filename=..", nil),
        ("attachment; filename=\"...\"", nil),
        ("attachment; filename=.bashrc", "bashrc"),
        ("attachment; filename=\"-rf\"", "_rf"),
        ("attachment; filename=\"..hidden..name\"", "hidden.name"),
        ("attachment; filename*=UTF-8''a%00b%0Ac%1B%5B31m.txt", "a_b_c_[31m.txt"),
        ("attachment; filename*=UTF-8''evil%E2%80%AEtxt.exe", "eviltxt.exe"),  // right-to-left override dropped
        ("attachment; filename*=UTF-8''%2e%2e%2f%CC%81x", "\u{301}x"),  // a separator a combining mark follows
        ("attachment; filename=\"x/\u{301}y\"", "\u{301}y"),
        ("attachment; filename=\"   \"", nil),
    ]

    @Test func theTable() {
        for (field, expected) in Self.table {
            let name = ContentDisposition.safeName(field)
            #expect(name == expected, "\(field.debugDescription)")
            Self.expectSafe(name, field)
        }
        #expect(ContentDisposition.safeName(nil) == nil)
    }

    @Test func aNameOfTenKilobytesIsCutKeepingItsExtension() throws {
        let long = String(repeating: "n", count: 10_240) + ".tar.gz"
        let name = try #require(ContentDisposition.safeName("attachment; filename=\"\(long)\""))
        #expect(name.utf8.count == SafeFileName.maxBytes)
        #expect(name.hasSuffix(".gz"))
        let encoded = try #require(ContentDisposition.safeName("attachment; filename*=UTF-8''" + String(repeating: "%E2%82%AC", count: 4000)))
        #expect(encoded.utf8.count <= SafeFileName.maxBytes && encoded.unicodeScalars.allSatisfy { $0 == "€" })
    }

    /// The same rules as a URL's name: a header cannot get a name a URL could not.
    @Test func madeSafeExactlyAsURLNamesAre() {
        for raw in ["report.pdf", " spaced ", "..hidden..", "a\u{7}b", "€.txt", String(repeating: "x", count: 300) + ".iso"] {
            #expect(ContentDisposition.safeName("attachment; filename*=UTF-8''" + (raw.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""))
                    == SafeFileName.sanitizedName(raw))
            #expect(SafeFileName.from(url: URL(string: "https://example.org/" + (raw.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""))!)
                    == SafeFileName.sanitizedName(raw) ?? SafeFileName.fallback)
        }
    }

    /// Random fields built from the pieces that matter (separators, quotes, escapes, `%`,
    /// apostrophes, controls, dots, combining marks): never a crash, always a safe name or none.
    @Test func randomFieldsGiveSafeNamesOrNone() {
        let pieces = ["attachment", "inline", "-", ";", "=", "\"", "\\", "/", "%", "%2f", "%2e", "%00", "%C3", "%ZZ", "'", "''",
                      "filename", "FileName*", "UTF-8", "iso-8859-1", ".", "..", " ", "\t", "\u{0}", "\u{1B}", "\u{301}",
                      "\u{202E}", "a", "é", "€", "x.txt"]
        var generator = SeededGenerator(seed: 22)
        for _ in 0..<20_000 {
            var field = ""
            for _ in 0..<Int.random(in: 0...24, using: &generator) { field += pieces.randomElement(using: &generator)! }
            Self.expectSafe(ContentDisposition.safeName(field), field)
        }
    }
}
