// swift-tools-version:6.0
import PackageDescription

// The benchmarks are a package of their own, so that the DataStack package keeps
// no dependencies: run them with
//   swift run -c release --package-path Benchmarks datastack-benchmarks [--n N] [--repetitions R] [--quick]
let package = Package(
    name: "DataStackBenchmarks",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "datastack-benchmarks", targets: ["DataStackBenchmarks"]),
    ],
    dependencies: [
        .package(name: "DataStack", path: ".."),
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
    ],
    targets: [
        .executableTarget(
            name: "DataStackBenchmarks",
            dependencies: [
                .product(name: "DataStack", package: "DataStack"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ],
            path: "Sources/DataStackBenchmarks"
        ),
    ],
    swiftLanguageModes: [.v6]
)
