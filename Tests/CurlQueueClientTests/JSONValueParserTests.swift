import CurlQueue
import CurlQueueClient
import CurlQueueTestHelpers
import Foundation
import Testing

/// `JSONValue(parsing:)`: its own one-pass parser, which must read every JSON document as
/// `JSONDecoder` does and refuse what is not JSON, saying where.
@Suite struct JSONValueParserTests {
    func parse(_ text: String) throws(HTTPClientError) -> JSONValue { try JSONValue(parsing: Data(text.utf8)) }

    static let documents = [
        #"{"a": [1, 2.5, -3e2, true, false, null], "b": {"c": "d"}, "e": []}"#,
        #"[]"#, #"{}"#, #"0"#, #"-0.5"#, #"1E+2"#, #""text""#, #"true"#, #"null"#,
        #"  [ 1 , { "k" : [ ] } ]  "#,
        #""escapes: \" \\ \/ \b \f \n \r \t \u00e9 \ud83d\ude00""#,
        #"{"same": 1, "same": 2}"#,
        #"["é", "日本", "\u0000"]"#,
        "\u{FEFF}{\"bom\": [1]}",  // a UTF-8 byte order mark first, which RFC 8259 lets a parser skip
    ]

    @Test(arguments: documents)
    func aValidDocumentReadsAsJSONDecoderReadsIt(_ text: String) throws {
        let decoded = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        #expect(try parse(text) == decoded)
    }

    @Test func booleansStayApartFromNumbersAndEscapesResolve() throws {
        #expect(try parse("[true, 1, 0, false]") == .array([.bool(true), .number(1), .number(0), .bool(false)]))
        #expect(try parse(#""\ud83d\ude00 \u00e9""#) == .string("😀 é"))
        #expect(try parse("1e400") == .number(.infinity))  // valid JSON, too large for a Double
    }

    @Test(arguments: [
        "", " ", "[", "[1,]", "[1 2]", #"{"a"}"#, #"{"a":1,}"#, "{1: 2}", "01", "1.", ".5", "-", "+1", "1e",
        #""\x""#, "\"\u{1}\"", #""open"#, "tru", "nul", "[1] 2", #""\ud800""#, #""\udc00 x""#, #""\u12""#, "NaN", "Infinity",
    ])
    func whatIsNotJSONIsRefusedWithWhereItStops(_ text: String) {
        do {
            _ = try parse(text)
            Issue.record("\(text.debugDescription) was taken as JSON")
        } catch {
            guard case .decoding(let path, let message) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(path == "$")
            #expect(message.contains("(at byte "), "\(message)")
            // Foundation's JSONDecoder also takes a trailing comma; RFC 8259 does not.
            if !text.hasSuffix(",]") && !text.hasSuffix(",}") {
                #expect((try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))) == nil, "JSONDecoder takes \(text.debugDescription)")
            }
        }
    }

    @Test func invalidUTF8InAStringIsRefused() {
        let bytes: [UInt8] = [0x22, 0xC3, 0x28, 0x22]  // "\xC3(" : a broken two-byte sequence
        #expect(throws: HTTPClientError.self) { try JSONValue(parsing: Data(bytes)) }
    }

    @Test func nestingIsBoundedAt512Levels() throws {
        let deepest = String(repeating: "[", count: 512) + String(repeating: "]", count: 512)
        #expect(try parse(deepest) != .null)
        let tooDeep = String(repeating: "[", count: 513) + String(repeating: "]", count: 513)
        do {
            _ = try parse(tooDeep)
            Issue.record("513 levels were taken")
        } catch {
            guard case .decoding(_, let message) = error else { Issue.record("\(error)"); return }
            #expect(message == "nested deeper than 512 levels (at byte 512)")
        }
        // Deep and wide at once, the shape that took JSONDecoder minutes: read whole.
        let wide = String(repeating: "[", count: 500) + Array(repeating: "[]", count: 2000).joined(separator: ",")
            + String(repeating: "]", count: 500)
        var value = try parse(wide)
        for _ in 0..<499 {
            guard case .array(let elements) = value, elements.count == 1 else { break }
            value = elements[0]
        }
        #expect(value == .array(Array(repeating: .array([]), count: 2000)))
    }
}
