import CurlQueue
import CurlQueueClient
import CurlQueueTestHelpers
import CurlQueueTestSupport
import Foundation
import Testing

/// multipart/form-data: the exact bytes on the wire, files from memory and disk, escaping,
/// refused injections, and boundaries.
@Suite struct HTTPClientMultipartTests {
    @Test func fieldsAndFilesAreSentAsMultipartFormData() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("notes.txt")
        try Data("from disk".utf8).write(to: file)
        try await withServer { (server) async throws in
            let client = makeClient(server)
            var form = MultipartForm(boundary: "XyZ")
            form.addField(name: "title", value: "Holiday é")
            form.addFile(name: "photo", filename: "beach \"1\".jpg", contentType: "image/jpeg", data: Data([0x00, 0xFF, 0x0D, 0x0A]))
            form.addFile(name: "notes", contentType: "text/plain", contentsOf: file)
            let echo = try await client.post("echo", body: .multipart(form), as: Echo.self)
            #expect(echo.values("Content-Type") == ["multipart/form-data; boundary=XyZ"])
            var expected = Data()
            expected.append(contentsOf: Array("--XyZ\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nHoliday é\r\n".utf8))
            expected.append(contentsOf: Array("--XyZ\r\nContent-Disposition: form-data; name=\"photo\"; filename=\"beach %221%22.jpg\"\r\nContent-Type: image/jpeg\r\n\r\n".utf8))
            expected.append(contentsOf: [0x00, 0xFF, 0x0D, 0x0A])
            expected.append(contentsOf: Array("\r\n--XyZ\r\nContent-Disposition: form-data; name=\"notes\"; filename=\"notes.txt\"\r\nContent-Type: text/plain\r\n\r\nfrom disk\r\n--XyZ--\r\n".utf8))
            #expect(echo.bodyData == expected)
        }
    }

    @Test(arguments: [("na\r\nme", "f"), ("name", "evil\r\nContent-Type: text/html"), ("a\nb", "f"), ("n", "x\u{0}y")])
    func crOrLFInANameOrFileNameIsRefusedAndNothingIsSent(name: String, filename: String) async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            var form = MultipartForm()
            form.addFile(name: name, filename: filename, data: Data("x".utf8))
            do throws(HTTPClientError) {
                _ = try await client.post("echo", body: .multipart(form))
                Issue.record("an injection must be refused")
            } catch {
                guard case .encoding(let reason) = error else { throw error }
                #expect(reason.contains("CR, LF"))
            }
            #expect(server.requests.isEmpty)
        }
    }

    @Test func aContentTypeThatCouldInjectIsRefused() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            var form = MultipartForm()
            form.addFile(name: "f", filename: "f", contentType: "text/plain\r\nX-Evil: 1", data: Data())
            await #expect(throws: HTTPClientError.self) { try await client.post("echo", body: .multipart(form)) }
            #expect(server.requests.isEmpty)
        }
    }

    @Test func aMissingFileIsAnEncodingError() async throws {
        try await withServer { (server) async throws in
            let client = makeClient(server)
            var form = MultipartForm()
            form.addFile(name: "f", contentsOf: URL(fileURLWithPath: "/nonexistent/file.bin"))
            do throws(HTTPClientError) {
                _ = try await client.post("echo", body: .multipart(form))
                Issue.record("the file is missing")
            } catch {
                guard case .encoding = error else { throw error }
            }
        }
    }

    @Test func boundariesAreRandomAndSafe() {
        let boundaries = Set((0..<100).map { _ in MultipartForm().boundary })
        #expect(boundaries.count == 100)
        #expect(boundaries.allSatisfy { $0.count == 30 && $0.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" } })
        #expect(MultipartForm(boundary: "a b\r\n\"c").boundary == "a-b---c")
        #expect(MultipartForm(boundary: "").boundary == "-")
        // A boundary that is not a bare token is quoted in the header (strict parsers refuse it
        // bare), never in the body's delimiter lines.
        #expect(MultipartForm(boundary: "a:b=c(1)").contentType == #"multipart/form-data; boundary="a:b=c(1)""#)
        #expect(MultipartForm(boundary: "plain-Token_1.2").contentType == "multipart/form-data; boundary=plain-Token_1.2")
        let random = MultipartForm()
        #expect(random.contentType == "multipart/form-data; boundary=\(random.boundary)")
    }
}
