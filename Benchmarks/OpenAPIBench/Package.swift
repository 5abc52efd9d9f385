// swift-tools-version:6.0
// The OpenAPI transports' benchmark (Benchmarks/openapi.py runs it): a package of its own, so that
// neither CI nor the library's users build the other transports (async-http-client, URLSession).
// The generated client is the tests' own (Sources/OpenAPIFixtureClient links to it).
import Foundation
import PackageDescription

// A package depended on by path is known by its folder's name, which is the clone's name.
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()
let rootName = root.lastPathComponent

let package = Package(
    name: "OpenAPIBench",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: "../.."),
        .package(url: "https://github.com/apple/swift-openapi-runtime", exact: "1.13.4"),
        .package(url: "https://github.com/swift-server/swift-openapi-async-http-client", exact: "1.5.0"),
        .package(url: "https://github.com/apple/swift-openapi-urlsession", exact: "1.4.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.0.0"),
    ],
    targets: [
        .target(
            name: "OpenAPIFixtureClient",
            dependencies: [
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            exclude: ["openapi.yaml", "openapi-generator-config.yaml"],
            // Generated code, not edited: its empty namespace files import what they do not use
            // (the generator marks those imports for Swift 6.4 and later only).
            swiftSettings: [.unsafeFlags(["-suppress-warnings"])]
        ),
        .executableTarget(
            name: "openapi-bench",
            dependencies: [
                "OpenAPIFixtureClient",
                .product(name: "CurlQueue", package: rootName),
                .product(name: "CurlQueueOpenAPI", package: rootName),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIAsyncHTTPClient", package: "swift-openapi-async-http-client"),
                .product(name: "OpenAPIURLSession", package: "swift-openapi-urlsession"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
