@testable import curlq
import Foundation
import Testing

/// curlq's output: JSON strings, text in columns, the live area and the bars.
@Suite struct CurlqOutputTests {
    @Test func jsonStringsAreEscaped() throws {
        let nasty = "quote\" backslash\\ newline\n tab\t nul\u{0} bell\u{7} line\u{2028} é 😀"
        let literal = JSONReport.string(nasty)
        let decoded = try JSONSerialization.jsonObject(with: Data("[\(literal)]".utf8)) as? [String]
        #expect(decoded == [nasty])
        #expect(JSONReport.number(.nan) == "0" && JSONReport.number(1.23456) == "1.235")
    }

    @Test func displayTextFitsItsColumns() {
        #expect(Format.width("abc") == 3)
        #expect(Format.width("日本") == 4)
        #expect(Format.width("e\u{301}") == 1)
        #expect(Format.fit("abcdefghij", 5) == "abcd…")
        #expect(Format.width(Format.fit("日本語のファイル名", 7)) <= 7)
        #expect(Format.fit("ab", 5, pad: true) == "ab   ")
        #expect(Format.safe("a\u{1B}[2Jb\nc") == "a?[2Jb?c")
        #expect(Format.bytes(1023) == "1023 B" && Format.bytes(1536) == "1.50 KiB" && Format.bytes(5 << 30) == "5.00 GiB")
        #expect(Format.duration(3.25) == "3.2s" || Format.duration(3.25) == "3.3s")
        #expect(Format.duration(125) == "2:05" && Format.duration(3725) == "1:02:05")
    }

    @Test func theLiveAreaRedrawsInPlace() {
        var area = Terminal.LiveArea()
        let first = area.redraw(log: [], lines: ["a", "b"])
        #expect(first == "\r\u{1B}[2Ka\n\u{1B}[2Kb\n\u{1B}[J")
        let second = area.redraw(log: ["done"], lines: ["c"])
        #expect(second == "\r\u{1B}[2A\u{1B}[J\u{1B}[2Kdone\n\u{1B}[2Kc\n\u{1B}[J")
        #expect(area.redraw(log: [], lines: ["d"]) == "\r\u{1B}[1A\u{1B}[2Kd\n\u{1B}[J")
        #expect(area.erase() == "\r\u{1B}[1A\u{1B}[J")
        #expect(area.height == 0)
    }

    @Test func barFramesNeverWrap() {
        let jobs = ["short", String(repeating: "long-name-", count: 10), "日本語のファイル名.bin"].enumerated().map { index, name in
            Job(index: index, url: URL(string: "http://example.org/\(index)")!, name: name,
                priority: .normal, checksum: nil, headers: [], resumeOffset: 0, plan: .download)
        }
        var model = BatchModel(jobs: jobs, maxAttempts: 6)
        for index in jobs.indices {
            model.markStarted(index, at: monotonicSeconds())
            model.progress(index, bytes: 123_456, total: index == 1 ? nil : 1_000_000, at: monotonicSeconds())
        }
        for columns in [20, 40, 80, 119, 200] {
            for line in BarDisplay().frame(model, columns: columns, rows: 10) {
                #expect(Format.width(line) <= columns, "\(columns) columns: \(line)")
            }
        }
        for rows in 1...6 {
            #expect(BarDisplay().frame(model, columns: 80, rows: rows).count <= max(1, rows - 1), "more lines than \(rows) rows hold")
        }
        #expect(BarDisplay().frame(model, columns: 80, rows: 40).count == 4, "a line per running file and the overall line")
    }
}
