import Foundation
@testable import ObjectGraph
import DataStack
import Testing

/// `datastack reindex`: the full-text index built for a store Apple's Core Data
/// wrote, from the Spotlight flags of the model it caches.
@Suite struct ReindexCommandTests {
    static let noteStore = "plaso-apple-stores/stores/ios-NoteStore.sqlite"

    @Test func reindexBuildsTheIndexOfAnAppleStoreFromItsCachedModel() throws {
        let workspace = try ToolWorkspace()
        let store = try workspace.copyStore(Self.noteStore)
        #expect(try RawSQL(store).integer("SELECT count(*) FROM sqlite_master WHERE name LIKE 'DS_SEARCH%'") == 0)

        let result = try Tool.run(["reindex", store.path])
        #expect(result.status == 0, "\(result.errorOutput)")
        #expect(result.output.contains("rebuilt the search index"), "\(result.output)")

        // Every index holds every row of its table, as FTS5's own check confirms on a writable connection.
        let tables = try RawSQL(store).column("""
            SELECT name FROM sqlite_master WHERE name LIKE 'DS\\_SEARCH\\_%' ESCAPE '\\' AND sql LIKE 'CREATE VIRTUAL TABLE%'
            """).compactMap { $0 }
        #expect(!tables.isEmpty)
        let writable = try Connection(path: store.path)
        for table in tables {
            try writable.execute("INSERT INTO \(table) (\(table), rank) VALUES ('integrity-check', 1)")
        }
        // A reading command still opens the store, and leaves the index alone.
        let inspect = try Tool.run(["inspect", store.path])
        #expect(inspect.status == 0, "\(inspect.errorOutput)")
        #expect(try RawSQL(store).column("SELECT name FROM sqlite_master WHERE name LIKE 'DS\\_SEARCH\\_%' ESCAPE '\\' AND sql LIKE 'CREATE VIRTUAL TABLE%'").compactMap { $0 } == tables)
    }

    @Test func aModelThatMarksNothingLeavesNoIndexAndSaysSo() throws {
        let workspace = try ToolWorkspace()
        let store = try workspace.copyStore(InspectCommandTests.wibosco)
        let model = ToolWorkspace.fixtures.appendingPathComponent(MigrateCommandTests.models + "CoreDataMigration_Example.xcdatamodel")
        let result = try Tool.run(["reindex", store.path, "--model", model.path])
        #expect(result.status == 0, "\(result.errorOutput)")
        #expect(result.output.contains("marks no String attribute for search"), "\(result.output)")
        #expect(try RawSQL(store).integer("SELECT count(*) FROM sqlite_master WHERE name LIKE 'DS_SEARCH%'") == 0)
    }

    @Test func reindexOfAMissingFileExits66() throws {
        let workspace = try ToolWorkspace()
        let result = try Tool.run(["reindex", workspace.url.appendingPathComponent("none.sqlite").path])
        #expect(result.status == 66)
        #expect(result.errorOutput.contains("none.sqlite"))
    }
}
