// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "DataStack",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "DataStack", targets: ["DataStack"]),
        .library(name: "ObjectGraph", targets: ["ObjectGraph"]),
        .executable(name: "ticker-import", targets: ["TickerImport"]),
    ],
    targets: [
        .systemLibrary(
            name: "CSQLite",
            path: "Sources/CSQLite",
            providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite3"])]
        ),
        .target(
            name: "ObjectGraph",
            dependencies: ["CSQLite"],
            path: "Sources/ObjectGraph"
        ),
        .target(
            name: "DataStack",
            dependencies: ["ObjectGraph"],
            path: "Sources/DataStack"
        ),
        .executableTarget(
            name: "TickerImport",
            dependencies: ["DataStack"],
            path: "Examples/TickerImport",
            resources: [.copy("Resources/TickerModel.xcdatamodeld")]
        ),
        // A fault-injecting SQLite VFS for the engine's fault-injection suite (tests only).
        .target(
            name: "CFaultVFS",
            dependencies: ["CSQLite"],
            path: "Tests/CFaultVFS"
        ),
        .testTarget(
            name: "ObjectGraphTests",
            dependencies: ["ObjectGraph", "CFaultVFS"],
            path: "Tests/ObjectGraphTests"
        ),
        .testTarget(
            name: "DataStackTests",
            dependencies: ["DataStack"],
            path: "Tests/DataStackTests"
        ),
    ],
    swiftLanguageModes: [.v6]
)
