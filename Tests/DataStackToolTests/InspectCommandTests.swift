import Foundation
import DataStack
import Testing

/// `datastack inspect`: metadata, the model and where it came from, and object
/// counts that agree with SQL.
@Suite struct InspectCommandTests {
    static let wibosco = "wibosco-migration/stores/CoreDataMigration_Example_1.sqlite"
    static let wiboscoModel = "wibosco-migration/CoreDataMigration_Example.xcdatamodeld/CoreDataMigration_Example.xcdatamodel"
    static let kik = "plaso-apple-stores/stores/ios-kik.sqlite"

    @Test func inspectWithAnXcodeModelUsesItAndCountsTheObjects() throws {
        let workspace = try ToolWorkspace()
        let store = try workspace.copyStore(Self.wibosco)
        let model = ToolWorkspace.fixtures.appendingPathComponent(Self.wiboscoModel)
        let result = try Tool.run(["inspect", store.path, "--model", model.path, "--json"])
        #expect(result.status == 0, "\(result.errorOutput)")
        let json = try result.jsonObject()
        let described = try #require(json["model"] as? [String: Any])
        #expect(described["source"] as? String == "file")
        #expect(described["path"] as? String == model.path)
        let entities = try #require(described["entities"] as? [[String: Any]])
        #expect(entities.map { $0["name"] as? String } == ["Post"])
        #expect(entities.first?["attributes"] as? Int == 3)
        #expect(entities.first?["objects"] as? Int == (try RawSQL(store).count(entity: "Post", root: "Post")))
        let metadata = try #require(json["metadata"] as? [String: Any])
        #expect(metadata["uuid"] as? String == (try RawSQL(store).column("SELECT Z_UUID FROM Z_METADATA").first ?? nil))
        #expect(metadata["storeType"] as? String == "SQLite")
        #expect(json["history"] is NSNull)

        let text = try Tool.run(["inspect", store.path, "--model", model.path])
        #expect(text.status == 0)
        #expect(text.output.contains("from \(model.path)"))
        #expect(text.lines.contains { $0.hasPrefix("Post ") && $0.hasSuffix(" 1001") })
    }

    /// kik has neither a model file nor `Z_MODELCACHE`: its model is inferred.
    @Test func inspectOfKikInfersTheModelAndCountsEveryEntityAsSQLDoes() throws {
        let workspace = try ToolWorkspace()
        let store = try workspace.copyStore(Self.kik)
        let result = try Tool.run(["inspect", store.path, "--json"])
        #expect(result.status == 0, "\(result.errorOutput)")
        let json = try result.jsonObject()
        let described = try #require(json["model"] as? [String: Any])
        #expect(described["source"] as? String == "inferred")
        let entities = try #require(described["entities"] as? [[String: Any]])
        let raw = try RawSQL(store)
        #expect(entities.count == 7)
        for entity in entities {
            let name = try #require(entity["name"] as? String)
            #expect(entity["objects"] as? Int == (try raw.count(entity: name, root: name)), "\(name)")
        }
        let metadata = try #require(json["metadata"] as? [String: Any])
        #expect(metadata["frameworkVersion"] as? Int == 519)
        #expect((metadata["versionHashes"] as? [String: Any])?.count == 7)
    }
}
