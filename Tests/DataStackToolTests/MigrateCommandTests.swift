import Foundation
@testable import ObjectGraph
import DataStack
import Testing

/// `datastack migrate`: a wibosco store moved in place to its next model version.
@Suite struct MigrateCommandTests {
    static let models = "wibosco-migration/CoreDataMigration_Example.xcdatamodeld/"

    @Test func migrateMovesTheStoreToTheModelInPlace() throws {
        let workspace = try ToolWorkspace()
        let store = try workspace.copyStore(InspectCommandTests.wibosco)
        let target = ToolWorkspace.fixtures.appendingPathComponent(Self.models + "CoreDataMigration_Example 2.xcdatamodel")
        let before = try RawSQL(store).integer("SELECT count(*) FROM ZPOST")

        let result = try Tool.run(["migrate", store.path, "--model", target.path])
        #expect(result.status == 0, "\(result.errorOutput)")
        #expect(result.output.contains("migrated"))
        // Standard error is a file here, not a terminal: a line per step, ending at 100 %.
        let steps = result.errorOutput.split(separator: "\n")
        #expect(steps.first == "migrating: 0%" && steps.last == "migrating: 100%")

        let columns = try RawSQL(store).column("SELECT name FROM pragma_table_info('ZPOST')")
        #expect(columns.contains("ZHEXCOLOR") && !columns.contains("ZCOLOR"))
        #expect(try RawSQL(store).integer("SELECT count(*) FROM ZPOST") == before)
        #expect(try Self.header(of: store)[18] == 1, "the migrated store keeps its rollback journal")
        let inspect = try Tool.run(["inspect", store.path, "--model", target.path, "--json"])
        #expect(inspect.status == 0, "\(inspect.errorOutput)")

        let again = try Tool.run(["migrate", store.path, "--model", target.path])
        #expect(again.status == 0)
        #expect(again.output.contains("nothing to migrate"))
        #expect(again.errorOutput.isEmpty)
    }

    /// The target as an app ships it: a compiled `.mom` in a `.momd` — here the
    /// model Core Data cached in the store it migrated to.
    @Test func migrateTakesACompiledModelBundle() throws {
        let workspace = try ToolWorkspace()
        let store = try workspace.copyStore(InspectCommandTests.wibosco)
        let migrated = try workspace.copyStore("wibosco-migration/stores/CoreDataMigration_Example_2.sqlite")
        let cache = try #require(try RawSQL(migrated).blob("SELECT Z_CONTENT FROM Z_MODELCACHE"))
        let bundle = workspace.url.appendingPathComponent("Example.momd")
        try FileManager.default.createDirectory(at: bundle, withIntermediateDirectories: true)
        try RawDeflate.inflate(cache).write(to: bundle.appendingPathComponent("Example 2.mom"))

        let result = try Tool.run(["migrate", store.path, "--model", bundle.path])
        #expect(result.status == 0, "\(result.errorOutput)")
        let columns = try RawSQL(store).column("SELECT name FROM pragma_table_info('ZPOST')")
        #expect(columns.contains("ZHEXCOLOR") && !columns.contains("ZCOLOR"))
    }

    /// A rollback-journal store that already fits: reported, and not opened for
    /// writing, which would have turned it into a WAL store.
    @Test func aStoreThatAlreadyFitsIsLeftByteForByte() throws {
        let workspace = try ToolWorkspace()
        let store = try workspace.copyStore("wibosco-migration/stores/CoreDataMigration_Example_2.sqlite")
        let before = Self.files(of: store)
        #expect(try Self.header(of: store)[18] == 1, "the fixture has a rollback journal")

        let result = try Tool.run(["migrate", store.path, "--model", Self.model(2).path])
        #expect(result.status == 0, "\(result.errorOutput)")
        #expect(result.output.contains("nothing to migrate"))
        #expect(Self.files(of: store) == before, "the store and its -wal, -shm and -journal are as they were")
    }

    /// A garbage `Z_MODELCACHE` is reported as `inspect` reports it (65), whether
    /// the store fits the model or needs migrating, and nothing is written.
    @Test(arguments: [("CoreDataMigration_Example_2.sqlite", "fits"), ("CoreDataMigration_Example_1.sqlite", "needs migrating")])
    func aDamagedModelCacheIsADataErrorAndTheStoreIsLeftAsItWas(_ name: String, _ state: String) throws {
        let workspace = try ToolWorkspace()
        let store = try workspace.copyStore("wibosco-migration/stores/" + name)
        var configuration = Connection.Configuration()
        configuration.journalMode = .delete   // as the fixture is
        try Connection(path: store.path, configuration: configuration)
            .execute("UPDATE Z_MODELCACHE SET Z_CONTENT = X'0badc0de0badc0de0badc0de'")
        let before = Self.files(of: store)

        let result = try Tool.run(["migrate", store.path, "--model", Self.model(2).path])
        #expect(result.status == 65, "\(state): \(result.output) \(result.errorOutput)")
        #expect(result.errorOutput.contains("Z_MODELCACHE") && result.errorOutput.contains(store.path), "\(result.errorOutput)")
        let inspect = try Tool.run(["inspect", store.path])
        #expect(inspect.status == 65, "inspect reports the same store the same way")
        #expect(Self.files(of: store) == before, "\(state): the store and its sidecar files are as they were")
    }

    @Test func migrateWithoutModelIsAUsageError() throws {
        let workspace = try ToolWorkspace()
        let store = try workspace.copyStore(InspectCommandTests.wibosco)
        let result = try Tool.run(["migrate", store.path])
        #expect(result.status == 64)
        #expect(result.errorOutput.contains("--model"))
    }

    /// Version `number` of the wibosco model.
    static func model(_ number: Int) -> URL {
        ToolWorkspace.fixtures.appendingPathComponent(Self.models + "CoreDataMigration_Example\(number == 1 ? "" : " \(number)").xcdatamodel")
    }

    /// The bytes of the store file and of each SQLite file beside it, by suffix (absent ones left out).
    static func files(of store: URL) -> [String: Data] {
        var files: [String: Data] = [:]
        for suffix in ["", "-wal", "-shm", "-journal"] {
            if let data = FileManager.default.contents(atPath: store.path + suffix) { files[suffix] = data }
        }
        return files
    }

    /// The first 100 bytes of the file: SQLite's header, whose byte 18 is 1 for a rollback journal and 2 for WAL.
    static func header(of store: URL) throws -> Data {
        Data(try #require(FileManager.default.contents(atPath: store.path)).prefix(100))
    }
}
