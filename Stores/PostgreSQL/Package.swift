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
                .product(name: "DataStack", package: "DataStack"),
            ],
            path: "Sources/DataStackPostgreSQL"
        ),
        .executableTarget(
            name: "DataStackPostgreSQLBenchmarks",
            dependencies: [
                "DataStackPostgreSQL",
                .product(name: "ObjectGraph", package: "DataStack"),
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
