// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "DataStack",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "DataStack", targets: ["DataStack"]),
        .library(name: "ObjectGraph", targets: ["ObjectGraph"]),
        .library(name: "DataStackStorage", targets: ["DataStackStorage"]),
        .library(name: "DataStackStores", targets: ["DataStackStores"]),
        .library(name: "DataStackSync", targets: ["DataStackSync"]),
        .executable(name: "ticker-import", targets: ["TickerImport"]),
        .library(name: "TickerImportKit", targets: ["TickerImportKit"]),
        .executable(name: "datastack", targets: ["DataStackTool"]),
    ],
    targets: [
        .systemLibrary(
            name: "CSQLite",
            path: "Sources/CSQLite",
            providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite3"])]
        ),
        // The system zlib, for the raw DEFLATE of the model a Core Data store caches (Z_MODELCACHE).
        .systemLibrary(
            name: "CZlib",
            path: "Sources/CZlib",
            providers: [.apt(["zlib1g-dev"]), .brew(["zlib"])]
        ),
        // The layers, each importing only those below it (README, "Layout").
        // Locks and caches every layer uses; no other dependency.
        .target(
            name: "DataStackSupport",
            path: "Sources/DataStackSupport"
        ),
        // The SQLite driver: connections, statements, errors, busy mode, pragmas.
        .target(
            name: "DataStackSQLite",
            dependencies: ["CSQLite", "DataStackSupport"],
            path: "Sources/DataStackSQLite"
        ),
        // Model, objects, contexts, coordinator, fetch requests, predicates, controllers;
        // the store protocol and its save contract. Imports the driver only for the
        // SQLite options a store is opened with (StoreOptions).
        .target(
            name: "ObjectGraph",
            dependencies: ["CZlib", "DataStackSupport", "DataStackSQLite"],
            path: "Sources/ObjectGraph"
        ),
        // Core Data's table layout, history layout, SQL generation and the inferred
        // migration, written in a dialect (SQLDialect); names no database but SQLite's defaults.
        .target(
            name: "DataStackStorage",
            dependencies: ["ObjectGraph", "DataStackSupport"],
            path: "Sources/DataStackStorage"
        ),
        // The stores: SQLiteStore (files, search, external data, history, migration) and InMemoryStore.
        .target(
            name: "DataStackStores",
            dependencies: ["CSQLite", "DataStackSupport", "DataStackSQLite", "ObjectGraph", "DataStackStorage"],
            path: "Sources/DataStackStores"
        ),
        .target(
            name: "DataStack",
            dependencies: ["ObjectGraph", "DataStackStorage", "DataStackStores", "DataStackSQLite", "DataStackSupport"],
            path: "Sources/DataStack"
        ),
        // Replicas that sync through a hub: hybrid clocks, changes and their bytes, the
        // field-by-field merge, the SyncHub protocol and the engine a stack runs.
        .target(
            name: "DataStackSync",
            dependencies: ["DataStack", "DataStackSQLite", "DataStackSupport"],
            path: "Sources/DataStackSync"
        ),
        // ticker-import's code, a library so that Stores/PostgreSQL's ticker-import-postgresql runs the same command.
        .target(
            name: "TickerImportKit",
            dependencies: ["DataStack", "DataStackSync"],
            path: "Examples/TickerImport/Kit",
            resources: [.copy("Resources/TickerModel.xcdatamodeld")]
        ),
        .executableTarget(
            name: "TickerImport",
            dependencies: ["TickerImportKit"],
            path: "Examples/TickerImport/App"
        ),
        // `datastack`: inspect, dump, history and migrate any Core Data store from the command line.
        // packageAccess: false hides `package` members from it, so the compiler proves it uses public API only.
        .executableTarget(
            name: "DataStackTool",
            dependencies: ["DataStack", "DataStackSync"],
            path: "Sources/DataStackTool",
            packageAccess: false
        ),
        // The fuzz targets (Fuzz/README.md): what each parser is fed, their seeds from
        // the fixtures, and `DataStackFuzz`, which replays inputs or, built by
        // Fuzz/run with -sanitize=fuzzer -DFUZZING, hands a target to libFuzzer.
        .target(
            name: "FuzzTargets",
            dependencies: ["ObjectGraph", "DataStackStorage", "DataStackStores", "DataStackSQLite"],
            path: "Fuzz/Targets"
        ),
        .target(
            name: "CLibFuzzer",
            path: "Fuzz/CLibFuzzer"
        ),
        .executableTarget(
            name: "DataStackFuzz",
            dependencies: ["FuzzTargets", "CLibFuzzer"],
            path: "Fuzz/Driver"
        ),
        // A fault-injecting SQLite VFS for the engine's fault-injection suite (tests only).
        .target(
            name: "CFaultVFS",
            dependencies: ["CSQLite"],
            path: "Tests/CFaultVFS"
        ),
        .testTarget(
            name: "ObjectGraphTests",
            dependencies: ["ObjectGraph", "DataStackStorage", "DataStackStores", "DataStackSQLite", "DataStackSupport",
                           "CFaultVFS", "FuzzTargets"],
            path: "Tests/ObjectGraphTests",
            // Archives read by path from the tests (see Support/ArchiveFixtures.swift).
            exclude: ["Fixtures"]
        ),
        .testTarget(
            name: "DataStackTests",
            // TickerImportKit: its class-declared model is compared with its model file.
            // DataStackSync: the hub registry that --sync makes its hub from.
            dependencies: ["DataStack", "DataStackSQLite", "DataStackSupport", "TickerImportKit", "DataStackSync"],
            path: "Tests/DataStackTests"
        ),
        // Runs the built `datastack` executable against copies of fixture stores.
        .testTarget(
            name: "DataStackSyncTests",
            dependencies: ["DataStackSync", "DataStack"],
            path: "Tests/DataStackSyncTests"
        ),
        .testTarget(
            name: "DataStackToolTests",
            dependencies: ["DataStack", "DataStackSQLite", "DataStackSync"],
            path: "Tests/DataStackToolTests"
        ),
    ],
    swiftLanguageModes: [.v6]
)
