import Foundation
import DataStack
import Testing

/// `datastack history`, and inspect's history summary, on a store the engine
/// writes with persistent history, so the transactions are known exactly.
@Suite struct HistoryCommandTests {
    /// A one-entity Xcode model.
    static let modelContents = """
        <?xml version="1.0" encoding="UTF-8" standalone="yes"?>
        <model type="com.apple.IDECoreDataModeler.DataModel" documentVersion="1.0" minimumToolsVersion="Automatic" sourceLanguage="Swift" userDefinedModelVersionIdentifier="">
            <entity name="Company" representedClassName="Company" syncable="YES">
                <attribute name="name" optional="YES" attributeType="String"/>
                <attribute name="price" optional="YES" attributeType="Double" defaultValueString="0.0" usesScalarValueType="YES"/>
            </entity>
        </model>
        """

    /// A store with three transactions by author "tests": two companies
    /// inserted; ACME's price updated; BETA deleted. Returns the store and the model.
    static func storeWithHistory(in workspace: ToolWorkspace) throws -> (store: URL, model: URL) {
        let modelURL = try workspace.write(modelContents, to: "Companies.xcdatamodel/contents").deletingLastPathComponent()
        let storeURL = workspace.url.appendingPathComponent("Companies.sqlite")
        let model = try ManagedObjectModel(contentsOf: modelURL)
        let coordinator = PersistentStoreCoordinator(managedObjectModel: model)
        var options = StoreOptions()
        options.persistentHistoryTracking = true
        let store = try coordinator.addPersistentStore(type: .sqlite, at: storeURL, options: options)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        context.transactionAuthor = "tests"
        let company = try #require(model.entitiesByName["Company"])
        try context.performAndWait {
            let acme = ManagedObject(entity: company, insertInto: context)
            try acme.setValue("ACME", forKey: "name")
            let beta = ManagedObject(entity: company, insertInto: context)
            try beta.setValue("BETA", forKey: "name")
            try context.save()
            try acme.setValue(12.5, forKey: "price")
            try context.save()
            context.delete(beta)
            try context.save()
        }
        try coordinator.remove(store)
        return (storeURL, modelURL)
    }

    @Test func historyListsEveryTransactionWithItsChanges() throws {
        let workspace = try ToolWorkspace()
        let (store, model) = try Self.storeWithHistory(in: workspace)
        let result = try Tool.run(["history", store.path, "--model", model.path, "--json"])
        #expect(result.status == 0, "\(result.errorOutput)")
        let transactions = try result.jsonLines()
        #expect(transactions.map { $0["transaction"] as? Int } == [1, 2, 3])
        #expect(transactions.allSatisfy { $0["author"] as? String == "tests" })
        let changes = transactions.map { ($0["changes"] as? [[String: Any]]) ?? [] }
        #expect(changes.map { $0.map { $0["type"] as? String } } == [["insert", "insert"], ["update"], ["delete"]])
        #expect(changes[1].first?["updatedProperties"] as? [String] == ["price"])
        // BETA, deleted, is the inserted object that was not updated.
        let inserted = Set(changes[0].compactMap { $0["object"] as? String })
        let updated = try #require(changes[1].first?["object"] as? String)
        #expect(changes[2].compactMap { $0["object"] as? String } == Array(inserted.subtracting([updated])))

        let after = try Tool.run(["history", store.path, "--model", model.path, "--after", "1", "--json"])
        #expect(after.status == 0, "\(after.errorOutput)")
        #expect(try after.jsonLines().map { $0["transaction"] as? Int } == [2, 3])

        let text = try Tool.run(["history", store.path, "--model", model.path])
        #expect(text.lines.filter { $0.hasPrefix("transaction ") }.count == 3)
        #expect(text.lines.contains { $0.hasPrefix("  update") && $0.hasSuffix("price") })
    }

    @Test func inspectSummarizesTheHistory() throws {
        let workspace = try ToolWorkspace()
        let (store, model) = try Self.storeWithHistory(in: workspace)
        let result = try Tool.run(["inspect", store.path, "--model", model.path, "--json"])
        #expect(result.status == 0, "\(result.errorOutput)")
        let history = try #require(try result.jsonObject()["history"] as? [String: Any])
        #expect(history["transactions"] as? Int == 3)
        #expect((history["first"] as? [String: Any])?["transaction"] as? Int == 1)
        #expect((history["last"] as? [String: Any])?["transaction"] as? Int == 3)
        let timestamps = try RawSQL(store).column("SELECT ZTIMESTAMP FROM ATRANSACTION ORDER BY Z_PK")
        #expect(timestamps.count == 3)

        // The store caches its model, as Core Data's do: no --model needed.
        let alone = try Tool.run(["inspect", store.path, "--json"])
        #expect(alone.status == 0, "\(alone.errorOutput)")
        let described = try #require(try alone.jsonObject()["model"] as? [String: Any])
        #expect(described["source"] as? String == "cached")
        #expect((described["entities"] as? [[String: Any]])?.first?["objects"] as? Int == 1)
    }

    @Test func historyOfAStoreWithoutHistoryIsBadInput() throws {
        let workspace = try ToolWorkspace()
        let store = try workspace.copyStore(InspectCommandTests.kik)
        let result = try Tool.run(["history", store.path])
        #expect(result.status == 65)
        #expect(result.errorOutput.contains(store.path))
    }
}
