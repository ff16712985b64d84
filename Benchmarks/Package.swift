// swift-tools-version:6.0
import PackageDescription

// The benchmarks are a package of their own, so that the DataStack package keeps
// no dependencies: run them with
//   swift run -c release --package-path Benchmarks datastack-benchmarks [--n N] [--repetitions R] [--quick]
//
// Fluent (fluent-kit with its SQLite driver) is a contender only when the
// manifest is evaluated with DATASTACK_BENCH_FLUENT=1, in a build folder of its own:
//   DATASTACK_BENCH_FLUENT=1 swift run -c release --package-path Benchmarks \
//       --scratch-path Benchmarks/.build-fluent datastack-benchmarks --contenders raw,grdb-hand-written,fluent,datastack
// Without it nothing of Fluent is resolved or built (CI's smoke run).
let withFluent = Context.environment["DATASTACK_BENCH_FLUENT"] == "1"

var dependencies: [Package.Dependency] = [
    .package(name: "DataStack", path: ".."),
    .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
]
var benchmarkDependencies: [Target.Dependency] = [
    "CHeapUsage",
    .product(name: "DataStack", package: "DataStack"),
    // The import task's variant with a sync engine attached (issue #39).
    .product(name: "DataStackSync", package: "DataStack"),
    .product(name: "GRDB", package: "GRDB.swift"),
    .product(name: "GRDBSQLite", package: "GRDB.swift"),
]
var benchmarkSettings: [SwiftSetting] = []
if withFluent {
    dependencies += [
        .package(url: "https://github.com/vapor/fluent-kit", exact: "1.57.0"),
        .package(url: "https://github.com/vapor/fluent-sqlite-driver", exact: "4.9.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.81.0"),
    ]
    benchmarkDependencies += [
        .product(name: "FluentKit", package: "fluent-kit"),
        .product(name: "FluentSQL", package: "fluent-kit"),
        .product(name: "FluentSQLiteDriver", package: "fluent-sqlite-driver"),
        .product(name: "NIOPosix", package: "swift-nio"),
    ]
    benchmarkSettings.append(.define("FLUENT_CONTENDER"))
}

let package = Package(
    name: "DataStackBenchmarks",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "datastack-benchmarks", targets: ["DataStackBenchmarks"]),
    ],
    dependencies: dependencies,
    targets: [
        // The allocator's bytes in use, for memory per fetched object.
        .target(name: "CHeapUsage", path: "Sources/CHeapUsage"),
        .executableTarget(
            name: "DataStackBenchmarks",
            dependencies: benchmarkDependencies,
            path: "Sources/DataStackBenchmarks",
            swiftSettings: benchmarkSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
