import Foundation
import ObjectGraph
import Testing
import DataStackStores

/// A coordinator's stores: adding, finding, removing, metadata, reopening.
@Suite struct CoordinatorTests {
    @Test func addingASQLiteStoreOpensItAtItsLocation() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Shop.sqlite")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        let store = try coordinator.addPersistentStore(type: .sqlite, at: url)
        #expect(store.type == .sqlite)
        #expect(store.url == url)
        #expect(store.configurationName == nil)
        #expect(!store.isReadOnly)
        #expect(UUID(uuidString: store.identifier) != nil)
        #expect(FileManager.default.fileExists(atPath: url.path))
        #expect(coordinator.persistentStores.map(\.identifier) == [store.identifier])
        #expect(coordinator.persistentStore(for: url) === store)
        #expect(coordinator.persistentStore(for: directory.url.appendingPathComponent("./sub/../Shop.sqlite")) === store)
        #expect(coordinator.persistentStore(for: directory.file("Other.sqlite")) == nil)
    }

    @Test func addingAnInMemoryStoreNeedsNoLocation() throws {
        let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        let store = try coordinator.addPersistentStore(type: .inMemory, at: nil)
        #expect(store.type == .inMemory)
        #expect(store.url == nil)
        #expect(UUID(uuidString: store.identifier) != nil)
        #expect(coordinator.persistentStores.count == 1)
    }

    @Test(arguments: allStoreTypes)
    func metadataNamesTheTypeTheUUIDAndTheModelsHashes(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let store = stack.coordinator.persistentStores[0]
        let metadata = stack.coordinator.metadata(for: store)
        #expect(metadata[StoreMetadataKey.storeType] as? String == type.rawValue)
        #expect(metadata[StoreMetadataKey.storeUUID] as? String == store.identifier)
        let hashes = try #require(metadata[StoreMetadataKey.modelVersionHashes] as? [String: Data])
        #expect(hashes == stack.model.entityVersionHashesByName)
        #expect(store.metadata[StoreMetadataKey.storeUUID] as? String == store.identifier)
    }

    @Test func addingTheSameLocationTwiceThrowsAlreadyAdded() throws {
        let stack = try TestStack(type: .sqlite)
        let error = #expect(throws: PersistentStoreError.self) {
            try stack.coordinator.addPersistentStore(type: .sqlite, at: stack.storeURL)
        }
        #expect(error?.code == .alreadyAdded)
        #expect(error?.url == stack.storeURL)
        #expect(error.map { "\($0)" }?.contains(stack.storeURL.path) == true)
        #expect(stack.coordinator.persistentStores.count == 1)
    }

    @Test(arguments: allStoreTypes)
    func aRemovedStoreIsGoneAndRemovingItAgainThrows(type: StoreType) throws {
        let stack = try TestStack(type: type)
        try stack.seedCompanies(["A"])
        let store = stack.coordinator.persistentStores[0]
        try stack.coordinator.remove(store)
        #expect(stack.coordinator.persistentStores.isEmpty)
        if let url = store.url { #expect(stack.coordinator.persistentStore(for: url) == nil) }

        let error = #expect(throws: PersistentStoreError.self) { try stack.coordinator.remove(store) }
        #expect(error?.code == .storeNotFound)

        let context = stack.newContext()
        context.performAndWait {
            #expect(throws: ObjectGraphError.noStore(entity: "Company")) { try context.fetch(FetchRequest<Company>()) }
            Company(context: context).symbol = "B"
            #expect(throws: (any Error).self) { try context.save() }
            #expect(context.hasChanges)
        }
    }

    @Test func aRemovedSQLiteStoreCanBeAddedAgain() throws {
        let stack = try TestStack(type: .sqlite)
        try stack.seedCompanies(["A"])
        let first = stack.coordinator.persistentStores[0]
        try stack.coordinator.remove(first)
        let second = try stack.coordinator.addPersistentStore(type: .sqlite, at: stack.storeURL)
        #expect(second.identifier == first.identifier)
        let context = stack.newContext()
        try context.performAndWait { () throws in
            #expect(try context.fetch(FetchRequest<Company>()).map(\.symbol) == ["A"])
        }
    }

    @Test func reopeningAFileKeepsItsDataAndItsUUID() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Keep.sqlite")
        let (uuid, id): (String, ObjectID) = try {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
            let store = try coordinator.addPersistentStore(type: .sqlite, at: url)
            let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
            let id = try context.performAndWait {
                let company = Company(context: context)
                company.symbol = "KEEP"
                company.founded = Date(timeIntervalSinceReferenceDate: 1_000)
                let update = StockUpdate(context: context)
                update.company = company
                update.price = 9.5
                try context.save()
                return company.objectID
            }
            try coordinator.remove(store)
            return (store.identifier, id)
        }()

        let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        let store = try coordinator.addPersistentStore(type: .sqlite, at: url)
        #expect(store.identifier == uuid)
        #expect(coordinator.metadata(for: store)[StoreMetadataKey.storeUUID] as? String == uuid)
        let uri = try #require(coordinator.managedObjectID(forURIRepresentation: id.uriRepresentation()))
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let company = try #require(try context.existingObject(with: uri) as? Company)
            #expect(company.symbol == "KEEP")
            #expect(company.founded == Date(timeIntervalSinceReferenceDate: 1_000))
            #expect(company.updates.map(\.price) == [9.5])
            // Keys go on from where they were.
            let next = Company(context: context)
            next.symbol = "NEXT"
            try context.save()
            #expect(next.objectID.primaryKey == 2)
        }
    }

    @Test func userMetadataIsSavedWithTheNextSaveAndSurvivesReopening() throws {
        let stack = try TestStack(type: .sqlite)
        let store = stack.coordinator.persistentStores[0]
        var metadata = stack.coordinator.metadata(for: store)
        metadata["importedThrough"] = "2024-06-01"
        metadata["batches"] = 12
        try stack.coordinator.setMetadata(metadata, for: store)
        #expect(stack.coordinator.metadata(for: store)["importedThrough"] as? String == "2024-06-01")
        try stack.seedCompanies(["A"])

        let other = try stack.secondCoordinator()
        let reopened = other.metadata(for: other.persistentStores[0])
        #expect(reopened["importedThrough"] as? String == "2024-06-01")
        #expect(reopened["batches"] as? Int == 12)
        #expect(reopened[StoreMetadataKey.storeUUID] as? String == store.identifier)
        #expect(reopened[StoreMetadataKey.storeType] as? String == "SQLite")
    }

    @Test func twoInMemoryStoresAreSeparate() throws {
        let first = try TestStack(type: .inMemory)
        let second = try TestStack(type: .inMemory)
        try first.seedCompanies(["A"])
        #expect(first.coordinator.persistentStores[0].identifier != second.coordinator.persistentStores[0].identifier)
        let context = second.newContext()
        try context.performAndWait { () throws in
            #expect(try context.count(for: FetchRequest<Company>()) == 0)
        }
    }
}
