// swift-tools-version:6.0
// apns-worker: Kafka events in, Apple push notifications out.
// No package dependencies: C libraries come from Debian through system-library targets.
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    // Lets the optimizer inline and specialize across our modules (JSON values, the request model and
    // the transport are used from every other module): about 5% less CPU per notification in
    // `bench pipeline`. Release only; debug builds and tests are unaffected.
    .unsafeFlags(["-cross-module-optimization"], .when(configuration: .release)),
]

let package = Package(
    name: "apns-worker",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "apns-worker", targets: ["apns-worker"]),
    ],
    targets: [
        // System libraries, found through pkg-config.
        .systemLibrary(name: "CRdKafka", pkgConfig: "rdkafka", providers: [.apt(["librdkafka-dev"])]),
        .systemLibrary(name: "CNghttp2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CYAML", pkgConfig: "yaml-0.1", providers: [.apt(["libyaml-dev"])]),
        .systemLibrary(name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        // The executable's malloc. The worker allocates on its event loops and frees on librdkafka's and the
        // producer's threads, and every record's task takes a 1 KiB allocator slab; glibc's malloc spent
        // ~10% of a loop thread there. jemalloc's per-thread caches and size classes cut the worker's CPU per
        // notification by about 8% in `bench pipeline`.
        .systemLibrary(name: "CJemalloc", pkgConfig: "jemalloc", providers: [.apt(["libjemalloc-dev"])]),

        .target(
            name: "APNs", dependencies: ["CNghttp2", "COpenSSL"], swiftSettings: strict,
            linkerSettings: [.linkedLibrary("m")]
        ),
        .target(name: "APNsSimulator", dependencies: ["APNs", "CNghttp2", "COpenSSL"], swiftSettings: strict),
        .target(name: "PushRules", dependencies: ["APNs", "CYAML"], swiftSettings: strict),
        .target(name: "Kafka", dependencies: ["CRdKafka"], swiftSettings: strict),
        .target(
            name: "Worker",
            dependencies: ["APNs", "APNsSimulator", "PushRules", "Kafka", "CMicroHTTPD"],
            swiftSettings: strict
        ),
        .target(name: "ChildProcesses", swiftSettings: strict),
        .executableTarget(
            name: "apns-worker", dependencies: ["Worker", "ChildProcesses", "CJemalloc"], swiftSettings: strict),

        .testTarget(name: "APNsTests", dependencies: ["APNs", "ChildProcesses"], swiftSettings: strict),
        .testTarget(name: "APNsSimulatorTests", dependencies: ["APNsSimulator", "APNs"], swiftSettings: strict),
        .testTarget(name: "PushRulesTests", dependencies: ["PushRules", "APNs"], swiftSettings: strict),
        .testTarget(name: "KafkaTests", dependencies: ["Kafka"], swiftSettings: strict),
        .testTarget(name: "WorkerTests", dependencies: ["Worker"], swiftSettings: strict),
    ],
    swiftLanguageModes: [.v6]
)
