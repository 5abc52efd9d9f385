// swift-tools-version:6.0
import PackageDescription

// libFuzzer harnesses for CurlQueue's parsers of untrusted input: one executable per parser,
// whose `main` is libFuzzer's and which defines `LLVMFuzzerTestOneInput`. Not part of the
// product, and not built by `swift build` at the root. Build and run them with `scripts/fuzz`:
// the instrumentation flags come from its command line (see there), because flags set here
// would reach these targets only, not CurlQueue, and libFuzzer would get no coverage of it.
//
// The harnesses call the same internal API as the engine, through `@testable import` (the
// script builds with -enable-testing).
let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "CurlQueueFuzz",
    dependencies: [
        .package(name: "CurlQueue", path: ".."),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.0.0"),
    ],
    targets: [
        .executableTarget(
            name: "FuzzResponseHead",
            dependencies: [
                .product(name: "CurlQueue", package: "CurlQueue"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "FuzzRetryAfter",
            dependencies: [.product(name: "CurlQueue", package: "CurlQueue")],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "FuzzContentRange",
            dependencies: [.product(name: "CurlQueue", package: "CurlQueue")],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "FuzzJSONValue",
            dependencies: [.product(name: "CurlQueueClient", package: "CurlQueue")],
            swiftSettings: strict
        ),
        // curlq's input-file parser (CurlQueueDownloads: InputFile, Rate).
        .executableTarget(
            name: "FuzzInputFile",
            dependencies: [
                .product(name: "CurlQueue", package: "CurlQueue"),
                .product(name: "CurlQueueDownloads", package: "CurlQueue"),
            ],
            swiftSettings: strict
        ),
        // curlq -J's Content-Disposition parser and the file-name rules it shares with URL
        // names (CurlQueueDownloads: ContentDisposition, SafeFileName).
        .executableTarget(
            name: "FuzzContentDisposition",
            dependencies: [.product(name: "CurlQueueDownloads", package: "CurlQueue")],
            swiftSettings: strict
        ),
        // curlq daemon's JSON-RPC request parser: Sources/curlq/RPC/RPCValue.swift,
        // RPCValue+Parser.swift and JSONRPCMessage.swift through symbolic links (Foundation only).
        .executableTarget(
            name: "FuzzJSONRPC",
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)
