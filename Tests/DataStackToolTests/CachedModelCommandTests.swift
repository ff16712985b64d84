import Foundation
import DataStack
import Testing

/// The tool on stores that carry their model only in `Z_MODELCACHE`: Apple
/// Notes, whose entities share one table with suffixed columns, and a cache
/// that is damaged.
@Suite struct CachedModelCommandTests {
    static let notes = "apple-notes-notestore/stores/NoteStore-macOS-12-Monterey.sqlite"

    @Test func inspectUsesTheCachedModelAndCountsEveryEntityAsSQLDoes() throws {
        let workspace = try ToolWorkspace()
        let store = try workspace.copyStore(Self.notes)
        let result = try Tool.run(["inspect", store.path, "--json"])
        #expect(result.status == 0, "\(result.errorOutput)")
        let described = try #require(try result.jsonObject()["model"] as? [String: Any])
        #expect(described["source"] as? String == "cached")
        let entities = try #require(described["entities"] as? [[String: Any]])
        #expect(entities.count == 18)
        let raw = try RawSQL(store)
        let numbers = try raw.entityNumbers()
        for entity in entities {
            let name = try #require(entity["name"] as? String)
            // Every entity of Notes but these three shares ICCloudSyncingObject's table.
            let root = ["ICCloudState", "ICLocation", "ICAttachmentLocation", "ICNoteData", "ICServerChangeToken"].contains(name)
                ? (name == "ICAttachmentLocation" ? "ICLocation" : name) : "ICCloudSyncingObject"
            #expect(entity["objects"] as? Int == (try raw.integer(
                "SELECT count(*) FROM Z\(root.uppercased()) WHERE Z_ENT = \(numbers[name] ?? -1)")), "\(name)")
        }
    }

    /// A folder's title is in `ZTITLE2`, a note's in `ZTITLE1`: the cached model's
    /// column suffixes must come out as Core Data gave them.
    @Test func dumpReadsSuffixedColumnsAsCoreDataAssignedThem() throws {
        let workspace = try ToolWorkspace()
        let store = try workspace.copyStore(Self.notes)
        let raw = try RawSQL(store)
        let numbers = try raw.entityNumbers()
        for (entity, column) in [("ICFolder", "ZTITLE2"), ("ICNote", "ZTITLE1")] {
            let result = try Tool.run(["dump", store.path, "--entity", entity, "--json"])
            #expect(result.status == 0, "\(result.errorOutput)")
            let titles = try result.jsonLines().map { ($0["attributes"] as? [String: Any])?["title"] as? String }
            let expected = try raw.column("SELECT \(column) FROM ZICCLOUDSYNCINGOBJECT WHERE Z_ENT = \(numbers[entity] ?? -1) ORDER BY Z_PK")
            #expect(!titles.isEmpty)
            #expect(titles == expected, "\(entity)")
        }
    }

    @Test func aDamagedModelCacheExits65NamingTheStoreAndTheCache() throws {
        let workspace = try ToolWorkspace()
        let store = try workspace.copyStore(Self.notes)
        let connection = try Connection(path: store.path)
        try connection.execute("UPDATE Z_MODELCACHE SET Z_CONTENT = x'0badc0de0badc0de0badc0de0badc0de'")
        for command in ["inspect", "dump"] {
            let result = try Tool.run([command, store.path])
            #expect(result.status == 65, "\(command): \(result.errorOutput)")
            #expect(result.errorOutput.contains(store.path), "\(command): \(result.errorOutput)")
            #expect(result.errorOutput.contains("Z_MODELCACHE"), "\(command): \(result.errorOutput)")
            #expect(result.output.isEmpty)
        }
    }
}
