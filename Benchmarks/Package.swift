// swift-tools-version:6.0
// The benchmark clients of scripts/bench: a package of its own, so that neither CI nor the
// library's users build the comparison clients (async-http-client, URLSession).
import Foundation
import PackageDescription

// A package depended on by path is known by its folder's name, which is the clone's name:
// read it instead of assuming it.
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
let rootName = root.lastPathComponent

let package = Package(
    name: "CurlQueueBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.80.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.30.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
    ],
    targets: [
        // Arguments, getrusage, VmHWM and the one JSON line every client prints.
        .target(name: "BenchSupport"),
        // CurlQueue through RequestQueue: completion handlers, async, and the scheduler-only runs.
        .executableTarget(
            name: "cq-bench",
            dependencies: [
                "BenchSupport", .product(name: "CurlQueue", package: rootName),
                // CQ_BENCH_METRICS=1: a trivial backend, to measure the core's metrics with one.
                .product(name: "CoreMetrics", package: "swift-metrics"),
                // CQ_BENCH_TRACING=1: a tracer that exports nothing, to measure the core's spans with one.
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // URLSession from FoundationNetworking (itself on libcurl).
        .executableTarget(name: "urlsession-bench", dependencies: ["BenchSupport"]),
        // swift-server/async-http-client (SwiftNIO).
        .executableTarget(
            name: "ahc-bench",
            dependencies: [
                "BenchSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
