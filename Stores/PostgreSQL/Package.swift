// swift-tools-version:6.0
import PackageDescription

// The PostgreSQL store for DataStack: a synchronous connection layer over libpq
// (PostgreSQL's own C client), built as its own package so the main package keeps
// no PostgreSQL dependency. See README.md.
let package = Package(
    name: "DataStackPostgreSQL",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "DataStackPostgreSQL", targets: ["DataStackPostgreSQL"]),
        .executable(name: "ticker-import-postgresql", targets: ["TickerImportPostgreSQL"]),
        // One process of the multi-process tests (ThreeProcessTests): importer, viewer or reader.
        .executable(name: "datastack-postgresql-peer", targets: ["DataStackPostgreSQLPeer"]),
        .executable(name: "datastack-postgresql-benchmarks", targets: ["DataStackPostgreSQLBenchmarks"]),
    ],
    dependencies: [
        .package(name: "DataStack", path: "../.."),
    ],
    targets: [
        // The system libpq (Debian: libpq-dev; Homebrew: libpq).
        .systemLibrary(
            name: "CLibPQ",
            path: "Sources/CLibPQ",
            providers: [.apt(["libpq-dev"]), .brew(["libpq"])]
        ),
        .target(
            name: "DataStackPostgreSQL",
            dependencies: [
                "CLibPQ",
                .product(name: "ObjectGraph", package: "DataStack"),
                .product(name: "DataStackStorage", package: "DataStack"),
                .product(name: "DataStack", package: "DataStack"),
            ],
            path: "Sources/DataStackPostgreSQL"
        ),
        // ticker-import with the PostgreSQL store registered: `--store postgresql://…`.
        .executableTarget(
            name: "TickerImportPostgreSQL",
            dependencies: ["DataStackPostgreSQL", .product(name: "TickerImportKit", package: "DataStack")],
            path: "Sources/TickerImportPostgreSQL"
        ),
        .executableTarget(
            name: "DataStackPostgreSQLPeer",
            dependencies: ["DataStackPostgreSQL", .product(name: "DataStack", package: "DataStack")],
            path: "Sources/DataStackPostgreSQLPeer"
        ),
        // Import, fetch, fault and cross-process merge latency against raw libpq (see README).
        .executableTarget(
            name: "DataStackPostgreSQLBenchmarks",
            dependencies: [
                "DataStackPostgreSQL",
                .product(name: "ObjectGraph", package: "DataStack"),
                .product(name: "DataStackStorage", package: "DataStack"),
                .product(name: "DataStack", package: "DataStack"),
            ],
            path: "Benchmarks/Sources/DataStackPostgreSQLBenchmarks"
        ),
        .testTarget(
            name: "DataStackPostgreSQLTests",
            dependencies: ["DataStackPostgreSQL"],
            path: "Tests/DataStackPostgreSQLTests"
        ),
    ],
    swiftLanguageModes: [.v6]
)
