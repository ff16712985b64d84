// swift-tools-version:6.0
import PackageDescription

// The PostgreSQL store for DataStack: a synchronous connection layer over libpq
// (PostgreSQL's own C client), built as its own package so the main package keeps
// no PostgreSQL dependency. See README.md.
//
// Fluent (fluent-kit with its PostgreSQL driver) is a contender of the benchmarks only
// when the manifest is evaluated with DATASTACK_BENCH_FLUENT=1, in a build folder of its
// own, as in the main package's Benchmarks/:
//   DATASTACK_BENCH_FLUENT=1 swift build -c release --package-path Stores/PostgreSQL \
//       --scratch-path Stores/PostgreSQL/.build-fluent --product datastack-postgresql-benchmarks
// Without it nothing of Fluent is resolved or built (CI's build and tests).
let withFluent = Context.environment["DATASTACK_BENCH_FLUENT"] == "1"

var dependencies: [Package.Dependency] = [
    .package(name: "DataStack", path: "../.."),
]
var benchmarkDependencies: [Target.Dependency] = [
    "DataStackPostgreSQL",
    // The sync tasks (--sync-converge, --sync-latency, --sync-bytes): two replicas through
    // a PostgreSQLSyncHub.
    "DataStackPostgreSQLSync",
    .product(name: "DataStackSync", package: "DataStack"),
    .product(name: "ObjectGraph", package: "DataStack"),
    .product(name: "DataStackStorage", package: "DataStack"),
    .product(name: "DataStack", package: "DataStack"),
]
var benchmarkSettings: [SwiftSetting] = []
if withFluent {
    dependencies += [
        .package(url: "https://github.com/vapor/fluent-kit", exact: "1.57.0"),
        .package(url: "https://github.com/vapor/fluent-postgres-driver", exact: "2.14.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.81.0"),
    ]
    benchmarkDependencies += [
        .product(name: "FluentKit", package: "fluent-kit"),
        .product(name: "FluentSQL", package: "fluent-kit"),
        .product(name: "FluentPostgresDriver", package: "fluent-postgres-driver"),
        .product(name: "NIOPosix", package: "swift-nio"),
    ]
    benchmarkSettings.append(.define("FLUENT_CONTENDER"))
}

let package = Package(
    name: "DataStackPostgreSQL",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "DataStackPostgreSQL", targets: ["DataStackPostgreSQL"]),
        // A sync hub on PostgreSQL for DataStackSync's replicas (issue #39).
        .library(name: "DataStackPostgreSQLSync", targets: ["DataStackPostgreSQLSync"]),
        .executable(name: "ticker-import-postgresql", targets: ["TickerImportPostgreSQL"]),
        // One process of the multi-process tests (ThreeProcessTests): importer, viewer or reader.
        .executable(name: "datastack-postgresql-peer", targets: ["DataStackPostgreSQLPeer"]),
        // One replica of the convergence tests (SyncConvergenceTests): edit, sync or dump.
        .executable(name: "datastack-sync-peer", targets: ["DataStackSyncPeer"]),
        .executable(name: "datastack-postgresql-benchmarks", targets: ["DataStackPostgreSQLBenchmarks"]),
    ],
    dependencies: dependencies,
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
        // The hub that offline replicas (local SQLite stacks) push their changes to and pull
        // everyone's from, in one order: PostgreSQLSyncHub.
        .target(
            name: "DataStackPostgreSQLSync",
            dependencies: [
                "DataStackPostgreSQL",
                .product(name: "DataStackSync", package: "DataStack"),
            ],
            path: "Sources/DataStackPostgreSQLSync"
        ),
        // ticker-import with the PostgreSQL store registered: `--store postgresql://…`.
        .executableTarget(
            name: "TickerImportPostgreSQL",
            dependencies: ["DataStackPostgreSQL", "DataStackPostgreSQLSync", .product(name: "TickerImportKit", package: "DataStack")],
            path: "Sources/TickerImportPostgreSQL"
        ),
        .executableTarget(
            name: "DataStackPostgreSQLPeer",
            dependencies: ["DataStackPostgreSQL", .product(name: "DataStack", package: "DataStack")],
            path: "Sources/DataStackPostgreSQLPeer"
        ),
        .executableTarget(
            name: "DataStackSyncPeer",
            dependencies: ["DataStackPostgreSQL", "DataStackPostgreSQLSync", .product(name: "DataStack", package: "DataStack"),
                           .product(name: "DataStackSync", package: "DataStack")],
            path: "Sources/DataStackSyncPeer"
        ),
        // Import, fetch, fault, readers and cross-process merge latency against raw libpq
        // (and Fluent, in a Fluent build; see README).
        .executableTarget(
            name: "DataStackPostgreSQLBenchmarks",
            dependencies: benchmarkDependencies,
            path: "Benchmarks/Sources/DataStackPostgreSQLBenchmarks",
            swiftSettings: benchmarkSettings
        ),
        .testTarget(
            name: "DataStackPostgreSQLTests",
            dependencies: ["DataStackPostgreSQL", "DataStackPostgreSQLSync"],
            path: "Tests/DataStackPostgreSQLTests"
        ),
    ],
    swiftLanguageModes: [.v6]
)
