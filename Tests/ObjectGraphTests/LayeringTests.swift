import Foundation
import Testing

/// The layers as README's "Layout" draws them, checked on the sources: SwiftPM
/// refuses an import of a target that is not a dependency in a clean build, but
/// an incremental one may find the module anyway, and nothing in Package.swift
/// says that the storage layer stays free of the driver or that the core names
/// no other database. These tests do.
@Suite struct LayeringTests {
    /// Lowest first: a target may import only the ones before it.
    static let layers = ["DataStackSupport", "DataStackSQLite", "ObjectGraph", "DataStackStorage", "DataStackStores", "DataStack"]

    static let sources = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources")

    /// Each Swift file of a target with its text.
    static func files(of target: String) throws -> [(path: String, text: String)] {
        let root = sources.appendingPathComponent(target)
        let enumerator = try #require(FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil))
        var files: [(String, String)] = []
        for case let url as URL in enumerator where url.pathExtension == "swift" {
            files.append((String(url.path.dropFirst(sources.path.count + 1)), try String(contentsOf: url, encoding: .utf8)))
        }
        return files
    }

    /// The modules a file imports, whatever attributes the import carries.
    static func imports(_ text: String) -> [String] {
        text.split(separator: "\n").compactMap { line in
            let words = line.split(separator: " ")
            guard let index = words.firstIndex(of: "import"), words[..<index].allSatisfy({ $0.hasPrefix("@") }),
                  index + 1 < words.count else { return nil }
            return String(words[index + 1])
        }
    }

    @Test(arguments: layers)
    func aTargetImportsOnlyTheLayersBelowIt(target: String) throws {
        let level = try #require(Self.layers.firstIndex(of: target))
        let files = try Self.files(of: target)
        #expect(!files.isEmpty)
        for file in files {
            for module in Self.imports(file.text) {
                guard let other = Self.layers.firstIndex(of: module) else { continue }
                #expect(other < level, "\(file.path) imports \(module), which is not below \(target)")
            }
        }
    }

    @Test func theStorageLayerUsesNoDriver() throws {
        for file in try Self.files(of: "DataStackStorage") {
            #expect(!Self.imports(file.text).contains("DataStackSQLite"), "\(file.path) imports the SQLite driver")
            #expect(!Self.imports(file.text).contains("CSQLite"), "\(file.path) imports SQLite")
        }
    }

    @Test(arguments: ["ObjectGraph", "DataStackStorage", "DataStackStores"])
    func theCoreNamesNoOtherDatabaseAndAsksItsDialect(target: String) throws {
        for file in try Self.files(of: target) {
            for (number, line) in file.text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let code = line.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
                #expect(!code.localizedCaseInsensitiveContains("postgres"), "\(file.path):\(number + 1) names PostgreSQL")
                #expect(!code.contains("dialect ==") && !code.contains("dialect !="),
                        "\(file.path):\(number + 1) branches on a dialect instead of asking it")
            }
        }
    }

    /// One owner per job: only the coordinator stores into or evicts from its row
    /// cache, and only the busy mode waits by sleeping.
    @Test func theRowCacheHasOneOwnerAndOnlyTheBusyModeSleeps() throws {
        for target in Self.layers {
            for file in try Self.files(of: target) {
                let code = file.text.split(separator: "\n").map { $0.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first ?? "" }
                if !file.path.hasPrefix("ObjectGraph/Coordinator/") {
                    #expect(!code.contains { $0.contains("rowCache") }, "\(file.path) reaches the coordinator's row cache")
                }
                if file.path != "DataStackSQLite/BusyMode.swift" {
                    #expect(!code.contains { $0.contains("Thread.sleep") || $0.contains("usleep(") || $0.contains("Task.sleep") },
                            "\(file.path) waits by sleeping")
                }
            }
        }
    }
}
