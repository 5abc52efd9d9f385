// An API client in the style of the seeds: a register call as a request object, user info
// checked by a validator, an image from the CDN downloaded with resume, and a connection with
// JSON and logging middleware.
//
//     swift run APIClient
//
// It starts a local server (127.0.0.1, random port) that plays both the API and the CDN.
import CurlQueue
import CurlQueueClient
import CurlQueueDemoServer
import Foundation
import HTTPTypes
import Logging

let server = try await DemoServer.start()
var logger = Logger(label: "api")
logger.logLevel = .info

let client = HTTPClient(configuration: .init(
    baseURL: URL(string: server.baseURL)!,
    cdnURL: URL(string: server.baseURL)!,
    headerFields: [.userAgent: "APIClient-example/1.0"],
    middleware: [JSONMiddleware(), TokenAuthMiddleware.bearer("example-token"), LoggingMiddleware(logger: logger)]
))

/// YTKNetwork's RegisterApi; the local server's /echo stands in for /iphone/register.
struct RegisterAPI: APIRequest {
    struct Echo: Decodable, Sendable { var method: String; var uri: String; var bodyLength: Int }
    typealias Output = Echo
    var username: String
    var password: String
    var path: String { "/echo" }
    var method: HTTPRequest.Method { .post }
    var body: HTTPClient.Body? { .form(["username": username, "password": password]) }
}

/// YTKNetwork's GetUserInfoApi, with its validator; /json answers the document it is given.
struct GetUserInfoAPI: APIRequest {
    struct UserInfo: Decodable, Sendable { var nick: String; var level: Int }
    typealias Output = UserInfo
    var document: String
    var path: String { "/json" }
    var query: [URLQueryItem] { [URLQueryItem(name: "body", value: document)] }
    var validator: JSONValidator? { .object(["nick": .string, "level": .number]) }
}

/// YTKNetwork's GetImageApi: from the CDN, to a file, resumable.
struct GetImageAPI: APIRequest {
    typealias Output = URL
    var imageID: String
    var path: String { "/bytes/\(imageID)" }
    var useCDN: Bool { true }
    var resumableDownloadDestination: URL? {
        FileManager.default.temporaryDirectory.appendingPathComponent("curlqueue-image-\(imageID)-\(getpid())")
    }
}

let registered = try await client.send(RegisterAPI(username: "ann", password: "s3cret"))
print("registered: \(registered.method) \(registered.uri), \(registered.bodyLength) bytes of form")

let user = try await client.send(GetUserInfoAPI(document: #"{"nick": "ann", "level": 3}"#))
print("user: \(user.nick), level \(user.level)")
do {
    _ = try await client.send(GetUserInfoAPI(document: #"{"nick": "ann", "level": true}"#))
} catch {
    print("rejected as it should be: \(error)")
}

let image = try await client.send(GetImageAPI(imageID: "100000"))
let size = (try FileManager.default.attributesOfItem(atPath: image.path)[.size] as? NSNumber)?.intValue ?? 0
print("image: \(image.path), \(size) bytes")
try? FileManager.default.removeItem(at: image)

let results = await client.batch([GetUserInfoAPI(document: #"{"nick": "bo", "level": 1}"#),
                                  GetUserInfoAPI(document: #"{"nick": "cy", "level": 2}"#)])
print("batch: \(results.map { (try? $0.get().nick) ?? "failed" })")

try await server.shutdown()
