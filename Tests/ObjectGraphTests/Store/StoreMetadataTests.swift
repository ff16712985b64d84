import Foundation
import Testing
import ObjectGraph
import DataStackSQLite
import DataStackStores

/// Store metadata: read and written without a stack, kept by the store across
/// saves, and compared with a model's version hashes.
@Suite struct StoreMetadataTests {
    @Test func metadataOfAStoreThisEngineWrote() throws {
        let stack = try TestStack()
        let store = stack.coordinator.persistentStores[0]
        let metadata = try PersistentStoreCoordinator.metadataForPersistentStore(type: .sqlite, at: stack.storeURL)
        #expect(metadata[StoreMetadataKey.storeType] as? String == "SQLite")
        #expect(metadata[StoreMetadataKey.storeUUID] as? String == store.identifier)
        #expect(stack.model.isConfiguration(withName: nil, compatibleWithStoreMetadata: metadata))
        #expect(stack.model.isConfiguration(withName: nil, compatibleWithStoreMetadata: store.metadata))
    }

    /// A Core Data store whose rows (and metadata) are only in its `-wal`.
    @Test func metadataOfACoreDataStoreIsReadThroughItsLog() throws {
        let workspace = try FixtureWorkspace()
        let url = try workspace.copyStore("wibosco-migration/stores/CoreDataMigration_Example_WAL.sqlite")
        let metadata = try PersistentStoreCoordinator.metadataForPersistentStore(at: url)
        #expect(metadata[StoreMetadataKey.storeUUID] as? String == "95E4B0A1-CBFB-4257-B10B-EE64F7558656")
        #expect(metadata[StoreMetadataKey.storeType] as? String == "SQLite")
        #expect(metadata["NSPersistenceFrameworkVersion"] as? Int == 847)
        let hashes = try #require(metadata[StoreMetadataKey.modelVersionHashes] as? [String: any Sendable])
        #expect(Set(hashes.keys) == ["Color", "Post"])
        #expect(hashes.values.allSatisfy { ($0 as? Data)?.count == 32 })

        // Apple's hashes are not ours: the model that wrote the store is not "compatible"
        // by hashes, yet the store opens, because the structure decides.
        let versions = try ManagedObjectModel.versions(ofModelAt: CoreDataFixtures.url("wibosco-migration/CoreDataMigration_Example.xcdatamodeld"))
        let model = try ManagedObjectModel(contentsOf: try #require(versions["CoreDataMigration_Example 4"]))
        #expect(!model.isConfiguration(withName: nil, compatibleWithStoreMetadata: metadata))
        try PersistentStoreCoordinator(managedObjectModel: model).addPersistentStore(type: .sqlite, at: url)
    }

    @Test func missingOrForeignFilesThrowWithTheirPath() throws {
        let directory = TemporaryDirectory()
        let missing = directory.file("Missing.sqlite")
        let error = try #require(throws: PersistentStoreError.self) {
            try PersistentStoreCoordinator.metadataForPersistentStore(at: missing)
        }
        #expect(error.code == .cannotOpen)
        #expect(error.description.contains(missing.path))
        #expect(!FileManager.default.fileExists(atPath: missing.path))

        let text = directory.file("Notes.sqlite")
        try Data(String(repeating: "not a database ", count: 100).utf8).write(to: text)
        let notSQLite = try #require(throws: PersistentStoreError.self) {
            try PersistentStoreCoordinator.metadataForPersistentStore(at: text)
        }
        #expect(notSQLite.code == .notAStore)
        #expect(notSQLite.description.contains(text.path))

        let plain = directory.file("Plain.sqlite")
        let connection = try Connection(path: plain.path)
        try connection.execute("CREATE TABLE things (name TEXT)")
        let notCoreData = try #require(throws: PersistentStoreError.self) {
            try PersistentStoreCoordinator.metadataForPersistentStore(at: plain)
        }
        #expect(notCoreData.code == .notAStore)
        #expect(notCoreData.description.contains(plain.path))
        #expect(notCoreData.message.contains("Z_METADATA"))
        #expect(throws: PersistentStoreError.self) {
            try PersistentStoreCoordinator.setMetadata(["A": 1], forPersistentStoreOfType: .sqlite, at: plain)
        }
        #expect(throws: PersistentStoreError.self) {
            try PersistentStoreCoordinator.metadataForPersistentStore(type: .inMemory, at: plain)
        }
    }

    @Test func setMetadataWithoutAStackKeepsTheStoresIdentity() throws {
        let workspace = try FixtureWorkspace()
        let url = try workspace.copyStore("wibosco-migration/stores/CoreDataMigration_Example_3.sqlite")
        let before = try PersistentStoreCoordinator.metadataForPersistentStore(at: url)

        try PersistentStoreCoordinator.setMetadata(
            ["AppSchema": "3", "Launches": 12, StoreMetadataKey.storeUUID: "not-mine", StoreMetadataKey.modelVersionHashes: ["Post": Data()]],
            forPersistentStoreOfType: .sqlite, at: url)

        let after = try PersistentStoreCoordinator.metadataForPersistentStore(at: url)
        #expect(after["AppSchema"] as? String == "3")
        #expect(after["Launches"] as? Int == 12)
        #expect(after[StoreMetadataKey.storeUUID] as? String == before[StoreMetadataKey.storeUUID] as? String)
        #expect(after[StoreMetadataKey.storeType] as? String == "SQLite")
        let hashesBefore = before[StoreMetadataKey.modelVersionHashes] as? [String: any Sendable]
        let hashesAfter = after[StoreMetadataKey.modelVersionHashes] as? [String: any Sendable]
        #expect(hashesAfter?.mapValues { $0 as? Data } == hashesBefore?.mapValues { $0 as? Data })
        #expect(after["NSPersistenceFrameworkVersion"] as? Int == 847)
        // The file is still a rollback-journal Core Data store, and it opens.
        #expect(try SQLiteReference(url).rows("PRAGMA journal_mode") == [["delete"]])
        let versions = try ManagedObjectModel.versions(ofModelAt: CoreDataFixtures.url("wibosco-migration/CoreDataMigration_Example.xcdatamodeld"))
        let model = try ManagedObjectModel(contentsOf: try #require(versions["CoreDataMigration_Example 3"]))
        let store = try PersistentStoreCoordinator(managedObjectModel: model).addPersistentStore(type: .sqlite, at: url)
        #expect(store.metadata["AppSchema"] as? String == "3")
    }

    @Test func aCallersMetadataNeverReplacesTheModelRecord() throws {
        let stack = try TestStack()
        let store = try #require(stack.coordinator.persistentStores.first)
        let recorded = store.metadata[StoreMetadataKey.modelVersionHashes] as? [String: Data]
        var metadata = store.metadata
        metadata[StoreMetadataKey.modelVersionHashes] = ["Company": Data(count: 32), "StockUpdate": Data(count: 32)]
        metadata["AppSchema"] = "2"
        try stack.coordinator.setMetadata(metadata, for: store)
        let context = stack.newContext()
        try context.performAndWait {
            Company(context: context).symbol = "ACME"
            try context.save()
        }
        try stack.coordinator.remove(store)
        let reopened = try PersistentStoreCoordinator(managedObjectModel: TestModel.make()).addPersistentStore(type: .sqlite, at: stack.storeURL)
        #expect(reopened.metadata[StoreMetadataKey.modelVersionHashes] as? [String: Data] == recorded)
        #expect(reopened.metadata["AppSchema"] as? String == "2")
    }

    /// `setMetadata(_:for:)` is kept in memory and written with the next save
    /// that reaches the store. A context save with no changes does not reach the
    /// store (as in Core Data); an empty save request sent to the store writes it.
    @Test func instanceMetadataIsWrittenWithTheNextSave() throws {
        let stack = try TestStack()
        let store = stack.coordinator.persistentStores[0]
        var metadata = stack.coordinator.metadata(for: store)
        metadata["SyncToken"] = "abc"
        try stack.coordinator.setMetadata(metadata, for: store)
        #expect(stack.coordinator.metadata(for: store)["SyncToken"] as? String == "abc")
        #expect(try PersistentStoreCoordinator.metadataForPersistentStore(at: stack.storeURL)["SyncToken"] == nil)

        let context = stack.newContext()
        try context.performAndWait { try context.save() }   // nothing to save: the store is not asked
        #expect(try PersistentStoreCoordinator.metadataForPersistentStore(at: stack.storeURL)["SyncToken"] == nil)

        try context.performAndWait {
            Company(context: context).symbol = "A"
            try context.save()
        }
        let written = try PersistentStoreCoordinator.metadataForPersistentStore(at: stack.storeURL)
        #expect(written["SyncToken"] as? String == "abc")
        #expect(written[StoreMetadataKey.storeUUID] as? String == store.identifier)
        #expect(stack.model.isConfiguration(withName: nil, compatibleWithStoreMetadata: written))

        // Without object changes: an empty save request (the incremental-store way to save metadata).
        metadata["SyncToken"] = "def"
        try stack.coordinator.setMetadata(metadata, for: store)
        _ = try store.execute(.save(SaveChangesRequest()), in: nil)
        #expect(try PersistentStoreCoordinator.metadataForPersistentStore(at: stack.storeURL)["SyncToken"] as? String == "def")

        // And it survives reopening.
        try stack.coordinator.remove(store)
        let reopened = try PersistentStoreCoordinator(managedObjectModel: TestModel.make()).addPersistentStore(type: .sqlite, at: stack.storeURL)
        #expect(reopened.metadata["SyncToken"] as? String == "def")
    }

    @Test func compatibilityComparesEveryEntityHash() throws {
        let model = TestModel.make()
        model.configurations = ["Companies": ["Company"]]
        let hashes = model.entityVersionHashesByName
        #expect(model.isConfiguration(withName: nil, compatibleWithStoreMetadata: [StoreMetadataKey.modelVersionHashes: hashes]))
        #expect(!model.isConfiguration(withName: nil, compatibleWithStoreMetadata: [:]))
        #expect(!model.isConfiguration(withName: nil, compatibleWithStoreMetadata:
            [StoreMetadataKey.modelVersionHashes: hashes.filter { $0.key == "Company" }]))
        var changed = hashes
        changed["StockUpdate"] = Data(repeating: 0, count: 32)
        #expect(!model.isConfiguration(withName: nil, compatibleWithStoreMetadata: [StoreMetadataKey.modelVersionHashes: changed]))
        #expect(model.isConfiguration(withName: "Companies", compatibleWithStoreMetadata:
            [StoreMetadataKey.modelVersionHashes: hashes.filter { $0.key == "Company" }]))

        // A changed property changes its entity's hash.
        let other = TestModel.make()
        other.entitiesByName["Company"]?.properties.append(AttributeDescription(name: "sector", type: .string))
        #expect(!other.isConfiguration(withName: nil, compatibleWithStoreMetadata: [StoreMetadataKey.modelVersionHashes: hashes]))
    }
}
