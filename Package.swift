// swift-tools-version:6.0
// apns-worker: Kafka events in, Apple push notifications out.
// No package dependencies: C libraries come from Debian through system-library targets.
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    // Lets the optimizer inline and specialize across our modules (JSON values, the request model and
    // the transport are used from every other module; docs/performance.md has what it saves). Release
    // only; debug builds and tests are unaffected.
    .unsafeFlags(["-cross-module-optimization"], .when(configuration: .release)),
]

let package = Package(
    name: "apns-worker",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "apns-worker", targets: ["apns-worker"])
    ],
    targets: [
        // System libraries, found through pkg-config.
        .systemLibrary(name: "CRdKafka", pkgConfig: "rdkafka", providers: [.apt(["librdkafka-dev"])]),
        .systemLibrary(name: "CNghttp2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CYAML", pkgConfig: "yaml-0.1", providers: [.apt(["libyaml-dev"])]),
        .systemLibrary(name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        // The executable's malloc. The worker allocates on its event loops and frees on librdkafka's and the
        // producer's threads, and every record's task takes a 1 KiB allocator slab; glibc's malloc was a
        // large share of a loop thread's time there, and jemalloc's per-thread caches and size classes cut
        // the worker's CPU per notification (docs/performance.md).
        .systemLibrary(name: "CJemalloc", pkgConfig: "jemalloc", providers: [.apt(["libjemalloc-dev"])]),

        // The process's basics every threaded module shares: the monotonic clock, named threads, the
        // timer heap.
        .target(name: "Platform", swiftSettings: strict),
        // JSON values, parser and compact writer, RFC 3339 times, spelling suggestions for unknown keys.
        .target(name: "JSON", swiftSettings: strict, linkerSettings: [.linkedLibrary("m")]),
        // An epoll event loop, TLS, HTTP/2 connections and their pool: knows HTTP/2, not APNs.
        .target(name: "HTTP2", dependencies: ["Platform", "CNghttp2", "COpenSSL"], swiftSettings: strict),
        // The APNs request model and its rules, credentials, the client and its retry policy.
        .target(name: "APNs", dependencies: ["JSON", "HTTP2", "Platform", "COpenSSL"], swiftSettings: strict),
        // An APNs-compatible HTTP/2 server with fault injection, for tests, `dev` and benchmarks.
        .target(
            name: "APNsSimulator", dependencies: ["APNs", "JSON", "Platform", "CNghttp2", "COpenSSL"],
            swiftSettings: strict),
        // Rules files: loading, matching, templates, localization; an event compiled to APNs requests.
        .target(name: "PushRules", dependencies: ["APNs", "JSON", "CYAML"], swiftSettings: strict),
        // Swift wrappers over librdkafka; every rd_kafka_ call lives under Kafka/RDKafka/.
        .target(name: "Kafka", dependencies: ["Platform", "CRdKafka"], swiftSettings: strict),
        // The production pipeline, its configuration and observability. No simulator.
        .target(
            name: "Worker",
            dependencies: ["APNs", "JSON", "HTTP2", "Platform", "PushRules", "Kafka", "CMicroHTTPD"],
            swiftSettings: strict
        ),
        // `dev` and `bench pipeline`: the worker wired to kafka-mock and the simulator.
        .target(
            name: "WorkerDev",
            dependencies: ["Worker", "APNs", "APNsSimulator", "JSON", "Kafka", "Platform", "PushRules"],
            resources: [.embedInCode("Resources/rules.yaml")],
            swiftSettings: strict),
        .target(name: "ChildProcesses", dependencies: ["Platform"], swiftSettings: strict),
        .executableTarget(
            name: "apns-worker",
            dependencies: [
                "Worker", "WorkerDev", "APNs", "APNsSimulator", "HTTP2", "JSON", "Kafka", "PushRules", "Platform",
                "ChildProcesses", "CJemalloc",
            ],
            swiftSettings: strict),

        // What the test targets share: polling, child processes, temporary directories, seeded randomness,
        // a task-parking executor, and a plain HTTP/2 test server for the HTTP2 tests.
        .target(
            name: "TestSupport", dependencies: ["Platform", "ChildProcesses", "CNghttp2", "COpenSSL"],
            path: "Tests/TestSupport", swiftSettings: strict),
        .testTarget(
            name: "PlatformTests", dependencies: ["Platform", "ChildProcesses", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "JSONTests", dependencies: ["JSON", "TestSupport"], swiftSettings: strict),
        .testTarget(
            name: "HTTP2Tests", dependencies: ["HTTP2", "Platform", "TestSupport", "ChildProcesses"],
            swiftSettings: strict),
        .testTarget(
            name: "APNsTests",
            dependencies: ["APNs", "APNsSimulator", "JSON", "HTTP2", "Platform", "TestSupport", "COpenSSL"],
            swiftSettings: strict),
        .testTarget(
            name: "APNsSimulatorTests",
            dependencies: ["APNsSimulator", "APNs", "JSON", "Platform", "TestSupport", "COpenSSL"],
            swiftSettings: strict),
        .testTarget(
            name: "PushRulesTests", dependencies: ["PushRules", "APNs", "JSON", "TestSupport", "WorkerDev"],
            swiftSettings: strict),
        .testTarget(name: "KafkaTests", dependencies: ["Kafka", "Platform", "TestSupport"], swiftSettings: strict),
        .testTarget(
            name: "WorkerTests",
            dependencies: [
                "Worker", "WorkerDev", "APNs", "APNsSimulator", "JSON", "HTTP2", "Kafka", "PushRules", "TestSupport",
            ],
            swiftSettings: strict),
    ],
    swiftLanguageModes: [.v6]
)
