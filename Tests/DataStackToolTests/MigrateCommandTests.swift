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

    @Test func migrateWithoutModelIsAUsageError() throws {
        let workspace = try ToolWorkspace()
        let store = try workspace.copyStore(InspectCommandTests.wibosco)
        let result = try Tool.run(["migrate", store.path])
        #expect(result.status == 64)
        #expect(result.errorOutput.contains("--model"))
    }
}
