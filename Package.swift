// swift-tools-version:6.0
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "CurlQueue",
    products: [
        // The core: engine, operations, queue, request/response model, files.
        .library(name: "CurlQueue", targets: ["CurlQueue"]),
        // HTTPClient, middleware, JSON, response cache, OAuth2: built on the core's public API.
        .library(name: "CurlQueueClient", targets: ["CurlQueueClient"]),
        .executable(name: "curlq", targets: ["curlq"]),
        // What a download means above the core: failure kinds and their words, shared by
        // `curlq get`, the durable worker and programs that embed a batch downloader.
        .library(name: "CurlQueueDownloads", targets: ["CurlQueueDownloads"]),
        // Durable jobs: the job model, the store protocol and the worker (no store in it).
        .library(name: "CurlQueueDurable", targets: ["CurlQueueDurable"]),
        // The durable job store on one SQLite file (the system libsqlite3).
        .library(name: "CurlQueueSQLite", targets: ["CurlQueueSQLite"]),
        // A durable job store on PostgreSQL, shared by daemons on many machines (docs/durable.md).
        .library(name: "CurlQueuePostgres", targets: ["CurlQueuePostgres"]),
        // A durable worker as a swift-service-lifecycle Service (graceful shutdown drains it).
        .library(name: "CurlQueueDurableService", targets: ["CurlQueueDurableService"]),
        // A ClientTransport for swift-openapi-generator's clients on a RequestQueue (docs/openapi.md).
        .library(name: "CurlQueueOpenAPI", targets: ["CurlQueueOpenAPI"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.0.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.1.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        // The local HTTP servers: CurlQueueDemoServer (`curlq demo` and the examples; curlq links
        // it) and the tests' fixture server built on its parts. The library products do not.
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.80.0"),
        // CurlQueueDurableService only (and what uses it); CurlQueueDurable does not link it.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // CurlQueueOpenAPI only (and its tests and example); the core does not link it.
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4"),
        // The core's and the durable worker's metrics (docs/observability.md); CoreMetrics only,
        // MetricsTestKit in tests. 2.13: `withMetricsFactory`, which the tests use.
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        // curlq only: the daemon's Prometheus text (`MetricsExposition`); the libraries do not link it.
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // The core's spans (docs/observability.md#tracing): Tracing in CurlQueue, InMemoryTracing
        // in its tests only. A clean debug build of it alone: docs/performance.md.
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
    ],
    targets: [
        // libcurl itself, found through pkg-config, plus a header of static inline shims for
        // curl's variadic calls (curl_easy_setopt, curl_easy_getinfo, curl_multi_setopt).
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        // OpenSSL's libcrypto (already there with libcurl4-openssl-dev): sha256/sha512/sha1/md5
        // of downloaded files, computed as the bytes are written (Request.fileDigests).
        .systemLibrary(
            name: "CCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        .target(
            name: "CurlQueue",
            dependencies: [
                "CCurl",
                "CCrypto",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HeapModule", package: "swift-collections"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: strict
        ),
        // libpq, PostgreSQL's client library, for CurlQueuePostgres (docs/durable.md says why
        // libpq rather than postgres-nio: the build cost, measured).
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .target(
            name: "CurlQueuePostgres",
            dependencies: ["CurlQueue", "CurlQueueDurable", "CLibPQ"],
            swiftSettings: strict
        ),
        .target(
            name: "CurlQueueClient",
            dependencies: [
                "CurlQueue",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // The small server `curlq demo` and Examples/ download from (127.0.0.1): generated files,
        // slow, failing once, cut off. Not a product; the test fixture shares its parts.
        .target(
            name: "CurlQueueDemoServer",
            dependencies: [
                "CurlQueue",  // TextEscaping, shared with curlq
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "CurlQueueDownloads",
            dependencies: ["CurlQueue"],
            swiftSettings: strict
        ),
        .target(
            name: "CurlQueueDurable",
            dependencies: [
                "CurlQueue", "CurlQueueDownloads", .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "CurlQueueDurableService",
            dependencies: ["CurlQueueDurable", .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")],
            swiftSettings: strict
        ),
        .target(
            name: "CurlQueueOpenAPI",
            dependencies: [
                "CurlQueue",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: strict
        ),
        // The system SQLite (3.37 or later: STRICT tables, RETURNING).
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .target(
            name: "CurlQueueSQLite",
            dependencies: ["CurlQueue", "CurlQueueDurable", "CSQLite"],
            swiftSettings: strict
        ),
        .target(
            name: "CurlQueueTestSupport",
            dependencies: [
                "CurlQueueDemoServer",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Tests/CurlQueueTestSupport",
            swiftSettings: strict
        ),
        // The batch downloader. `curlq demo` serves its files from the demo server.
        .executableTarget(
            name: "curlq",
            dependencies: [
                "CurlQueue",
                "CurlQueueDemoServer",
                "CurlQueueDownloads",
                "CurlQueueDurable",
                "CurlQueuePostgres",
                "CurlQueueSQLite",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "HeapModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),  // to silence the library's log in `get`
                // The daemon's HTTP server (aria2's JSON-RPC, WebSocket): docs/daemon.md says why NIO.
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            // The daemon's web page (docs/web.md): static files served as they are, not compiled,
            // from `CurlQueue_curlq.resources/Web` beside the binary (RPC/StaticFiles.swift).
            resources: [.copy("Web")],
            swiftSettings: strict
        ),
        // Test-only: runs one download in a process of its own, to measure its peak memory.
        .executableTarget(
            name: "MemoryProbe",
            dependencies: ["CurlQueue"],
            path: "Tests/MemoryProbe",
            swiftSettings: strict
        ),
        // Test-only: the soak run (SoakTests), in a process of its own so that its file
        // descriptors, threads and memory are measured without the other tests'.
        .executableTarget(
            name: "Soak",
            dependencies: ["CurlQueue", "CurlQueueTestSupport"],
            path: "Tests/Soak",
            swiftSettings: strict
        ),
        // Test-only: the fixture server in a process of its own (scripts/valgrind-curlq).
        .executableTarget(
            name: "Fixture",
            dependencies: ["CurlQueueTestSupport"],
            path: "Tests/Fixture",
            swiftSettings: strict
        ),
        // Test-only: the OpenAPI fixture server in a process of its own (Benchmarks/openapi.py).
        .executableTarget(
            name: "OpenAPIFixture",
            dependencies: ["CurlQueueTestSupport"],
            path: "Tests/OpenAPIFixture",
            swiftSettings: strict
        ),
        // Test-only: the client generated once from Tests/OpenAPIFixtureClient/openapi.yaml
        // (swift-openapi-generator 1.14.3; its output committed, no generator in the build).
        .target(
            name: "OpenAPIFixtureClient",
            dependencies: [
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Tests/OpenAPIFixtureClient",
            exclude: ["openapi.yaml", "openapi-generator-config.yaml"],
            // Generated code, not edited: its empty namespace files import what they do not use
            // (the generator marks those imports for Swift 6.4 and later only).
            swiftSettings: [.unsafeFlags(["-suppress-warnings"])]
        ),
        .testTarget(
            name: "CurlQueueOpenAPITests",
            dependencies: [
                "CurlQueue",
                "CurlQueueOpenAPI",
                "OpenAPIFixtureClient",
                "CurlQueueTestSupport",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: strict
        ),
        // Test-only: helpers shared by the two test targets.
        .target(
            name: "CurlQueueTestHelpers",
            dependencies: ["CurlQueue", "CurlQueueTestSupport"],
            path: "Tests/CurlQueueTestHelpers",
            swiftSettings: strict
        ),
        .testTarget(
            name: "CurlQueueTests",
            dependencies: [
                "CurlQueue",
                "CurlQueueTestHelpers",
                "CurlQueueTestSupport",
                "MemoryProbe",
                "Soak",
                "curlq",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: strict
        ),
        // Test-only: the JobStore conformance suite, run against every store.
        .target(
            name: "CurlQueueDurableTestSupport",
            dependencies: ["CurlQueueDurable"],
            path: "Tests/CurlQueueDurableTestSupport",
            swiftSettings: strict
        ),
        // Test-only: a durable worker in a process of its own, for the tests that kill it.
        .executableTarget(
            name: "DurableWorkerProbe",
            dependencies: ["CurlQueue", "CurlQueueDurable", "CurlQueueSQLite", "CurlQueuePostgres"],
            path: "Tests/DurableWorkerProbe",
            swiftSettings: strict
        ),
        // The durable stores' benchmark (Benchmarks/durable.py runs it, in release).
        .executableTarget(
            name: "durable-bench",
            dependencies: ["CurlQueue", "CurlQueueDurable", "CurlQueueSQLite", "CurlQueuePostgres", "CLibPQ"],
            path: "Benchmarks/DurableBench",
            swiftSettings: strict
        ),
        .testTarget(
            name: "CurlQueueDurableTests",
            dependencies: [
                "CurlQueue",
                "CurlQueueDownloads",
                "CurlQueueDurable",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                "CurlQueueSQLite",
                "CurlQueueDurableTestSupport",
                "CurlQueueTestHelpers",
                "DurableWorkerProbe",
                "CurlQueueTestSupport",
                "curlq",
                "CurlQueueDurableService",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            swiftSettings: strict
        ),
        // Needs a PostgreSQL server: scripts/test starts one (scripts/test-postgres).
        .testTarget(
            name: "CurlQueuePostgresTests",
            dependencies: [
                "CurlQueuePostgres", "CurlQueueDurable", "CurlQueueDurableTestSupport", "CurlQueue",
                "CurlQueueTestHelpers", "CurlQueueTestSupport", "DurableWorkerProbe",
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "CurlQueueClientTests",
            dependencies: [
                "CurlQueue",
                "CurlQueueClient",
                "CurlQueueTestHelpers",
                "CurlQueueTestSupport",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
    ]
    + [
        // Examples/OpenAPIClient: the tests' generated client on CurlQueueTransport, against
        // the tests' OpenAPI fixture server.
        .executableTarget(
            name: "OpenAPIClient",
            dependencies: [
                "CurlQueue", "CurlQueueOpenAPI", "OpenAPIFixtureClient", "CurlQueueTestSupport",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            ],
            path: "Examples/OpenAPIClient",
            swiftSettings: strict
        ),
    ]
    + ["BatchDownload", "PriorityDaemon", "DownloadProgress", "APIClient", "DurableDaemon"].map { name in
        // Examples/: small programs for the four uses, built by CI so they never rot.
        .executableTarget(
            name: name,
            dependencies: ["CurlQueue", "CurlQueueDemoServer", .product(name: "Logging", package: "swift-log")]
                + (name == "APIClient" ? ["CurlQueueClient"] : [])
                + (name == "DurableDaemon" ? ["CurlQueueDurable", "CurlQueueSQLite", "CurlQueueDurableService",
                                              .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")] : []),
            path: "Examples/\(name)",
            swiftSettings: strict
        )
    },
    swiftLanguageModes: [.v6]
)
