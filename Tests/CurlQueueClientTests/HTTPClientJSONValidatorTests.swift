import CurlQueue
import CurlQueueClient
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// JSONValidator: required keys and their JSON types, nested objects and arrays, booleans
/// apart from numbers, the path of the first mismatch, and no crash on any input.
@Suite struct HTTPClientJSONValidatorTests {
    /// YTKNetwork's complex example.
    let questions: JSONValidator = .array(of: .object([
        "id": .number, "imageId": .string, "time": .number, "status": .number,
        "question": .object(["id": .number, "content": .string, "contentType": .number]),
    ]))

    func validation(_ validator: JSONValidator, _ json: String) -> (path: String, expected: String, got: String)? {
        do throws(HTTPClientError) {
            try validator.validate(Data(json.utf8))
            return nil
        } catch {
            if case .validation(let path, let expected, let got) = error { return (path, expected, got) }
            return ("not a validation error: \(error)", "", "")
        }
    }

    @Test func aMatchingDocumentPasses() throws {
        let document = #"""
        [{"id": 1, "imageId": "a", "time": 1.5e9, "status": 0, "extra": [1, "x"],
          "question": {"id": 2, "content": "why?", "contentType": 1}}]
        """#
        try questions.validate(Data(document.utf8))
        try JSONValidator.array(of: .string).validate(Data(#"["a", "b"]"#.utf8))
        try JSONValidator.array(of: .string).validate(Data("[]".utf8))
    }

    @Test func theFirstMismatchIsReportedWithItsPath() {
        let document = #"""
        [{"id": 1, "imageId": "a", "time": 1, "status": 0, "question": {"id": 2, "content": "c", "contentType": 1}},
         {"id": 1, "imageId": "a", "time": 1, "status": 0, "question": {"id": "2", "content": "c", "contentType": 1}}]
        """#
        let mismatch = validation(questions, document)
        #expect(mismatch?.path == "$[1].question.id")
        #expect(mismatch?.expected == "number")
        #expect(mismatch?.got == "string")
    }

    @Test func booleansAndNumbersAreDifferentTypes() {
        #expect(validation(.object(["level": .number]), #"{"level": true}"#)?.got == "bool")
        #expect(validation(.object(["ok": .bool]), #"{"ok": 1}"#)?.got == "number")
        #expect(validation(.object(["ok": .bool]), #"{"ok": 0}"#)?.got == "number")
        #expect(validation(.object(["level": .number]), #"{"level": "3"}"#)?.got == "string")
        #expect(validation(.object(["ok": .bool, "n": .number]), #"{"ok": false, "n": 0}"#) == nil)
    }

    @Test func aMissingKeyIsReportedAsMissing() {
        let mismatch = validation(.object(["nick": .string, "level": .number]), #"{"nick": "ann"}"#)
        #expect(mismatch?.path == "$.level")
        #expect(mismatch?.got == "missing")
    }

    @Test func optionalValuesMayBeNullOrAbsentButNotAnotherType() {
        let validator = JSONValidator.object(["nick": .optional(.string)])
        #expect(validation(validator, #"{}"#) == nil)
        #expect(validation(validator, #"{"nick": null}"#) == nil)
        #expect(validation(validator, #"{"nick": "ann"}"#) == nil)
        #expect(validation(validator, #"{"nick": 1}"#)?.expected == "string or null")
    }

    @Test func theRootTypeIsChecked() {
        #expect(validation(.object([:]), "[]")?.path == "$")
        #expect(validation(.array(of: .any), "{}")?.got == "object")
        #expect(validation(.null, "null") == nil)
        #expect(validation(.string, #""x""#) == nil)
    }

    @Test func keysThatAreNotIdentifiersAreQuotedInThePath() {
        #expect(validation(.object(["a b": .object(["x\"y": .number])]), #"{"a b": {"x\"y": "1"}}"#)?.path
            == #"$["a b"]["x\"y"]"#)
    }

    @Test func anyInputGivesAResultNeverACrash() {
        let validator = JSONValidator.object(["a": .array(of: .object(["b": .number]))])
        var inputs: [Data] = [
            Data(), Data("nul".utf8), Data("{".utf8), Data(#"{"a": [}"#.utf8), Data([0xFF, 0xFE, 0x00]),
            Data(String(repeating: "[", count: 100_000).utf8),
            Data((String(repeating: "{\"a\":", count: 50_000) + "1" + String(repeating: "}", count: 50_000)).utf8),
            Data("1e999999".utf8), Data("-".utf8), Data(#""\ud800""#.utf8), Data("123456789012345678901234567890".utf8),
        ]
        var generator = SeededGenerator(seed: 7)
        let alphabet = Array(#"{}[]",:0123456789.eE-+truefalsnl\ ab"#.utf8)
        for _ in 0..<2_000 {
            let count = Int.random(in: 0...40, using: &generator)
            inputs.append(Data((0..<count).map { _ in alphabet.randomElement(using: &generator)! }))
        }
        for input in inputs {
            do throws(HTTPClientError) {
                try validator.validate(input)
            } catch {
                switch error {
                case .validation, .decoding: break
                default: Issue.record("unexpected error \(error)")
                }
            }
        }
    }

    @Test func aRequestsValidatorRunsBeforeDecoding() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            #expect(try await client.send(GetUserInfo(document: userJSON)) == User(nick: "ann", level: 3))
            do throws(HTTPClientError) {
                _ = try await client.send(GetUserInfo(document: #"{"nick": "ann", "level": true}"#))
                Issue.record("a boolean level must fail validation")
            } catch {
                guard case .validation(let path, let expected, let got) = error else { throw error }
                #expect((path, expected, got) == ("$.level", "number", "bool"))
            }
        }
    }

    @Test func aBodyStartingWithAByteOrderMarkIsValidatedAsTheDecoderReadsIt() async throws {
        try await withServer { (server) async throws in
            // Some servers (.NET's, among others) start JSON with a UTF-8 BOM. JSONDecoder skips
            // it; before, the validator refused the body ("unexpected byte 0xef") that the same
            // call without a validator decoded.
            let client = makeClient(server)
            #expect(try await client.send(GetUserInfo(document: "\u{FEFF}" + userJSON)) == User(nick: "ann", level: 3))
            #expect(throws: HTTPClientError.self) { try JSONValidator.any.validate(Data("[1]\u{FEFF}".utf8)) }
        }
    }
}

/// YTKNetwork's user info call, with its validator.
struct GetUserInfo: APIRequest {
    typealias Output = User
    var document: String
    var path: String { "json" }
    var query: [URLQueryItem] { [URLQueryItem(name: "body", value: document)] }
    var validator: JSONValidator? { .object(["nick": .string, "level": .number]) }
}
