import Foundation
import Testing
import ObjectGraph
import DataStackStores

// A custom store written only against the public `PersistentStore` protocol
// (`JSONFileStore`, in Support/JSONStore.swift), plugged into a coordinator by its type.

@Suite struct CustomStoreTests {
    init() {
        StoreType.register(JSONFileStore.storeType)
    }

    private func addStore(_ coordinator: PersistentStoreCoordinator, at url: URL) throws -> any PersistentStore {
        try coordinator.addPersistentStore(type: #require(StoreType.named("JSONFile")), at: url)
    }

    @Test func roundTripThroughAContext() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Ticker.json")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        let store = try addStore(coordinator, at: url)
        #expect(store.type == JSONFileStore.storeType)
        #expect(!store.identifier.isEmpty)

        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            for (symbol, employees) in [("MSFT", 220), ("AAPL", 160), ("ACME", 3), ("IBM", 280)] {
                let company = Company(context: context)
                company.symbol = symbol
                company.employees = employees
                let update = StockUpdate(context: context)
                update.price = Double(employees) / 10
                update.company = company
            }
            try context.save()
        }

        let reader = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try reader.performAndWait {
            var request = FetchRequest<Company>(entityName: "Company")
            request.sortDescriptors = [FetchSort(key: "employees", ascending: false)]
            request.fetchLimit = 2
            #expect(try reader.fetch(request).map(\.symbol) == ["IBM", "MSFT"])
            request.fetchOffset = 2
            #expect(try reader.fetch(request).map(\.symbol) == ["AAPL", "ACME"])
            #expect(try reader.count(for: FetchRequest<Company>(entityName: "Company")) == 4)

            let sorted = try reader.fetch(FetchRequest<StockUpdate>(entityName: "StockUpdate", predicate: nil,
                                                                     sortDescriptors: [FetchSort(key: "company.symbol")]))
            #expect(sorted.map { $0.company?.symbol } == ["AAPL", "ACME", "IBM", "MSFT"])
            #expect(sorted[0].company?.updates.map(\.price) == [16])

            // Update one, delete another (the cascade takes its update along).
            let companies = try reader.fetch(FetchRequest<Company>(entityName: "Company", predicate: nil,
                                                                   sortDescriptors: [FetchSort(key: "symbol")]))
            companies[0].employees = 161
            reader.delete(companies[1])
            try reader.save()
        }

        // Reopened from the file by another coordinator.
        try coordinator.remove(store)
        let reopened = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        let again = try addStore(reopened, at: url)
        #expect(again.identifier == store.identifier)
        let fresh = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: reopened)
        try fresh.performAndWait {
            let companies = try fresh.fetch(FetchRequest<Company>(entityName: "Company", predicate: nil,
                                                                  sortDescriptors: [FetchSort(key: "symbol")]))
            #expect(companies.map(\.symbol) == ["AAPL", "IBM", "MSFT"])
            #expect(companies[0].employees == 161)
            #expect(companies.map { $0.updates.count } == [1, 1, 1])
            #expect(try fresh.count(for: FetchRequest<StockUpdate>(entityName: "StockUpdate")) == 3)
            // New keys continue after the file's counter.
            let company = Company(context: fresh)
            company.symbol = "NEW"
            try fresh.save()
            #expect(company.objectID.primaryKey == 5)
        }
    }

    @Test func versionMismatchIsAMergeConflict() throws {
        let directory = TemporaryDirectory()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        _ = try addStore(coordinator, at: directory.file("Ticker.json"))
        let first = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let second = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let id = try first.performAndWait {
            let company = Company(context: first)
            company.symbol = "A"
            try first.save()
            return company.objectID
        }
        // The second context reads version 1 and keeps the object (contexts let unchanged objects go).
        let stale = try second.performAndWait {
            let company = try #require(second.existingObject(with: id) as? Company)
            #expect(company.symbol == "A")
            return company
        }
        try first.performAndWait {
            (try first.existingObject(with: id) as? Company)?.employees = 1
            try first.save()
        }
        let error = second.performAndWait {
            stale.employees = 2
            return #expect(throws: ObjectGraphError.self) { try second.save() }
        }
        guard error?.code == .mergeConflict, let conflicts = error?.mergeConflicts else {
            Issue.record("expected a merge conflict, got \(String(describing: error))")
            return
        }
        #expect(conflicts.map(\.objectID) == [id])
        #expect(conflicts.first?.objectSnapshotVersion == 1)
        #expect(conflicts.first?.persistedSnapshotVersion == 2)
    }

    @Test func metadataOfACustomStoreWithoutAStack() throws {
        let directory = TemporaryDirectory()
        let url = directory.file("Ticker.json")
        let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        let store = try addStore(coordinator, at: url)
        try coordinator.setMetadata(["Owner": "me"], for: store)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            Company(context: context).symbol = "A"
            try context.save()
        }
        let type = JSONFileStore.storeType
        var metadata = try PersistentStoreCoordinator.metadataForPersistentStore(type: type, at: url)
        #expect(metadata[StoreMetadataKey.storeType] as? String == "JSONFile")
        #expect(metadata[StoreMetadataKey.storeUUID] as? String == store.identifier)
        #expect(metadata["Owner"] as? String == "me")
        #expect(coordinator.managedObjectModel.isConfiguration(withName: nil, compatibleWithStoreMetadata: metadata))

        metadata["Owner"] = "you"
        try PersistentStoreCoordinator.setMetadata(metadata, forPersistentStoreOfType: type, at: url)
        #expect(try PersistentStoreCoordinator.metadataForPersistentStore(type: type, at: url)["Owner"] as? String == "you")
        #expect(throws: PersistentStoreError.self) {
            try PersistentStoreCoordinator.metadataForPersistentStore(type: type, at: directory.file("Missing.json"))
        }
    }

    /// `migratePersistentStore` moves a custom store's objects into SQLite and back.
    @Test func customStoreMigratesToSQLiteAndBack() throws {
        let directory = TemporaryDirectory()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        let json = try addStore(coordinator, at: directory.file("Ticker.json"))
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try context.performAndWait {
            let company = Company(context: context)
            company.symbol = "A"
            for price in [1.0, 2.0] {
                let update = StockUpdate(context: context)
                update.price = price
                update.company = company
            }
            try context.save()
        }
        let sqlite = try coordinator.migratePersistentStore(json, to: directory.file("Ticker.sqlite"), type: .sqlite)
        let back = try coordinator.migratePersistentStore(sqlite, to: directory.file("Back.json"), type: JSONFileStore.storeType)
        #expect(coordinator.persistentStores.count == 1 && coordinator.persistentStores[0] === back)
        let reader = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let prices = try reader.performAndWait {
            try reader.fetch(FetchRequest<Company>(entityName: "Company")).flatMap { $0.updates.map(\.price) }.sorted()
        }
        #expect(prices == [1, 2])
    }

    // MARK: - Predicates

    /// A coordinator on each kind of store, by type name, all holding the same companies and updates.
    private func sameDataInEachStore(in directory: TemporaryDirectory) throws -> [String: PersistentStoreCoordinator] {
        let companies: [(symbol: String, name: String?, employees: Int, prices: [Double])] = [
            ("AAPL", "Apple", 160, [5, 15]), ("MSFT", "Microsoft", 220, [25]), ("ACME", nil, 3, [8]),
            ("IBM", "IBM", 280, [12, 40]), ("NONE", nil, 1, []),
        ]
        var stores: [String: PersistentStoreCoordinator] = [:]
        for type in [JSONFileStore.storeType, .inMemory, .sqlite] {
            let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
            try coordinator.addPersistentStore(type: type, at: type == .inMemory ? nil : directory.file("Ticker.\(type.rawValue)"))
            let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
            try context.performAndWait {
                for row in companies {
                    let company = Company(context: context)
                    company.symbol = row.symbol
                    company.name = row.name
                    company.employees = row.employees
                    for price in row.prices {
                        let update = StockUpdate(context: context)
                        update.price = price
                        update.company = company
                    }
                }
                StockUpdate(context: context).price = 30   // an update without a company
                try context.save()
            }
            stores[type.rawValue] = coordinator
        }
        return stores
    }

    /// What a fetch returns from each store (by type name), each object reduced to `key`.
    private func results<Result: ManagedObject, Key>(of request: FetchRequest<Result>, in stores: [String: PersistentStoreCoordinator],
                                                     _ key: (Result) -> Key) throws -> [String: [Key]] {
        try stores.mapValues { coordinator in
            let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
            return try context.performAndWait { try context.fetch(request).map(key) }
        }
    }

    /// The same `expected` for every store.
    private func everyStore<Key>(_ expected: [Key]) -> [String: [Key]] {
        ["JSONFile": expected, "InMemory": expected, "SQLite": expected]
    }

    @Test func predicateOnAnAttributeFetchesWhatTheBuiltInStoresFetch() throws {
        let directory = TemporaryDirectory()
        let stores = try sameDataInEachStore(in: directory)
        let request = FetchRequest<StockUpdate>(entityName: "StockUpdate", predicate: try FetchPredicate(format: "price > %@", 10),
                                                sortDescriptors: [FetchSort(key: "price")])
        #expect(try results(of: request, in: stores, \.price) == everyStore([12, 15, 25, 30, 40]))

        let companies = FetchRequest<Company>(entityName: "Company", predicate: try FetchPredicate(format: "name == nil OR employees < %@", 200),
                                              sortDescriptors: [FetchSort(key: "symbol")])
        #expect(try results(of: companies, in: stores, \.symbol) == everyStore(["AAPL", "ACME", "NONE"]))
    }

    @Test func predicateThroughAToOneFetchesWhatTheBuiltInStoresFetch() throws {
        let directory = TemporaryDirectory()
        let stores = try sameDataInEachStore(in: directory)
        var request = FetchRequest<StockUpdate>(entityName: "StockUpdate", predicate: try FetchPredicate(format: "company.symbol == %@", "AAPL"),
                                                sortDescriptors: [FetchSort(key: "price")])
        #expect(try results(of: request, in: stores, \.price) == everyStore([5, 15]))

        // A nil company makes the comparison unknown, so the orphan matches neither this nor its negation.
        request.predicate = try FetchPredicate(format: "NOT company.symbol == %@ AND company.employees > %@", "AAPL", 100)
        #expect(try results(of: request, in: stores, \.price) == everyStore([12, 25, 40]))
        request.predicate = try FetchPredicate(format: "company == nil")
        #expect(try results(of: request, in: stores, \.price) == everyStore([30]))

        // Sorted through the to-one too: nil sorts first, so last when descending.
        request.predicate = try FetchPredicate(format: "price < %@", 35)
        request.sortDescriptors = [FetchSort(key: "company.symbol", ascending: false), FetchSort(key: "price")]
        #expect(try results(of: request, in: stores, \.price) == everyStore([25, 12, 8, 5, 15, 30]))
    }

    @Test func predicateThroughAToManyFetchesWhatTheBuiltInStoresFetch() throws {
        let directory = TemporaryDirectory()
        let stores = try sameDataInEachStore(in: directory)
        var request = FetchRequest<Company>(entityName: "Company", predicate: try FetchPredicate(format: "ANY updates.price > %@", 20),
                                            sortDescriptors: [FetchSort(key: "symbol")])
        #expect(try results(of: request, in: stores, \.symbol) == everyStore(["IBM", "MSFT"]))
        request.predicate = try FetchPredicate(format: "updates.@count == 0")
        #expect(try results(of: request, in: stores, \.symbol) == everyStore(["NONE"]))
        request.predicate = try FetchPredicate(format: "SUBQUERY(updates, $u, $u.price < 10).@count > 0")
        #expect(try results(of: request, in: stores, \.symbol) == everyStore(["AAPL", "ACME"]))
    }
}
