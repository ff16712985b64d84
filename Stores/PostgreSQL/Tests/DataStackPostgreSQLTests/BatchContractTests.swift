import DataStackPostgreSQL
import Foundation
import ObjectGraph
import Testing

/// Batch updates and deletes on the SQLite store and the PostgreSQL store
/// alike: the same rows changed, the same results, versions, history, delete
/// rules and refusals.
@Suite("Batch contract", .serialized)
struct BatchContractTests {
    /// Listings with a unique symbol and tags (no delete rule from a listing;
    /// a tag denies its deletion while it has listings), and a vehicle tree.
    static func model() -> ManagedObjectModel {
        let listing = EntityDescription(name: "Listing", properties: [
            AttributeDescription(name: "symbol", type: .string, isOptional: false),
            AttributeDescription(name: "name", type: .string),
            AttributeDescription(name: "price", type: .double, isOptional: false, defaultValue: .double(0)),
            AttributeDescription(name: "rank", type: .integer16, isOptional: false, defaultValue: .integer(0)),
            AttributeDescription(name: "stock", type: .integer64),
            RelationshipDescription(name: "tags", destination: "Tag", inverse: "listings", isToMany: true, deleteRule: .noAction),
        ])
        listing.uniquenessConstraints = [["symbol"]]
        let tag = EntityDescription(name: "Tag", properties: [
            AttributeDescription(name: "name", type: .string, isOptional: false),
            RelationshipDescription(name: "listings", destination: "Listing", inverse: "tags", isToMany: true, deleteRule: .deny),
        ])
        let vehicle = EntityDescription(name: "Vehicle", properties: [AttributeDescription(name: "plate", type: .string)])
        let truck = EntityDescription(name: "Truck", properties: [
            AttributeDescription(name: "load", type: .integer64, isOptional: false, defaultValue: .integer(0)),
        ])
        vehicle.subentities = [truck]
        return ManagedObjectModel(entities: [listing, tag, vehicle, truck])
    }

    struct Fixture {
        let coordinator: PersistentStoreCoordinator
        let location: URL
        let model: ManagedObjectModel
        let ids: [String: ObjectID]

        func context(author: String? = nil) -> ManagedObjectContext {
            let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
            context.transactionAuthor = author
            return context
        }

        /// Each listing's symbol and values as a fresh coordinator reads them.
        func listings(_ kind: StoreKind) throws -> [String: String] {
            let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: try kind.coordinator(model, at: location))
            return try context.performAndWait {
                var result: [String: String] = [:]
                for listing in try context.fetch(FetchRequest<ManagedObject>(entityName: "Listing")) {
                    let symbol = try #require(listing.value(forKey: "symbol") as? String)
                    let name = try listing.value(forKey: "name") as? String ?? "-"
                    let price = try #require(listing.value(forKey: "price") as? Double)
                    let rank = try #require(listing.value(forKey: "rank") as? Int)
                    let tags = try #require(listing.value(forKey: "tags") as? Set<ManagedObject>).count
                    result[symbol] = "\(name) \(price) \(rank) \(tags)"
                }
                return result
            }
        }
    }

    /// Listings A 10, B 200, C 300 (A and B tagged "hot"), a vehicle and a truck.
    private func fixture(_ kind: StoreKind, history: Bool = false) throws -> Fixture {
        var options = StoreOptions()
        options.persistentHistoryTracking = history
        let model = Self.model()
        let location = try kind.makeLocation()
        let coordinator = try kind.coordinator(model, at: location, options: options)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let ids = try context.performAndWait {
            let entities = model.entitiesByName
            let hot = ManagedObject(entity: try #require(entities["Tag"]), insertInto: context)
            try hot.setValue("hot", forKey: "name")
            var objects: [String: ManagedObject] = ["hot": hot]
            for (symbol, price) in [("A", 10.0), ("B", 200.0), ("C", 300.0)] {
                let listing = ManagedObject(entity: try #require(entities["Listing"]), insertInto: context)
                try listing.setValue(symbol, forKey: "symbol")
                try listing.setValue(price, forKey: "price")
                objects[symbol] = listing
            }
            try hot.setValue(Set([try #require(objects["A"]), try #require(objects["B"])]), forKey: "listings")
            let car = ManagedObject(entity: try #require(entities["Vehicle"]), insertInto: context)
            try car.setValue("CAR", forKey: "plate")
            let truck = ManagedObject(entity: try #require(entities["Truck"]), insertInto: context)
            try truck.setValue("TRUCK", forKey: "plate")
            objects["CAR"] = car
            objects["TRUCK"] = truck
            try context.save()
            return objects.mapValues(\.objectID)
        }
        return Fixture(coordinator: coordinator, location: location, model: model, ids: ids)
    }

    private func ids(_ fixture: Fixture, _ names: String...) throws -> Set<ObjectID> {
        Set(try names.map { try #require(fixture.ids[$0]) })
    }

    // MARK: Update

    @Test("a batch update changes the matching rows only, and reports them as asked", arguments: StoreKind.allCases)
    func updateChangesMatchingRows(_ kind: StoreKind) throws {
        let fixture = try fixture(kind)
        let context = fixture.context()
        var request = BatchUpdateRequest(entityName: "Listing", predicate: try FetchPredicate(format: "price > 100"),
                                         propertiesToUpdate: ["name": "expensive", "price": 99.5])
        request.resultType = .objectIDs
        let result = try context.performAndWait { try context.execute(request) }
        #expect(result == .objectIDs(ContextDidSave(updatedObjectIDs: try ids(fixture, "B", "C"))))
        #expect(try fixture.listings(kind) == ["A": "- 10.0 0 1", "B": "expensive 99.5 0 1", "C": "expensive 99.5 0 0"])

        request.resultType = .count
        request.predicate = try FetchPredicate(format: "symbol == 'none'")
        #expect(try context.performAndWait { try context.execute(request) } == .count(0))
        request.predicate = nil
        #expect(try context.performAndWait { try context.execute(request) } == .count(3))
        request.resultType = .statusOnly
        #expect(try context.performAndWait { try context.execute(request) } == .statusOnly)
    }

    @Test("computed values read the row's own values; integers are truncated as on SQLite", arguments: StoreKind.allCases)
    func updateComputesFromTheRow(_ kind: StoreKind) throws {
        let fixture = try fixture(kind)
        let context = fixture.context()
        try context.performAndWait {
            _ = try context.execute(BatchUpdateRequest(entityName: "Listing",
                                                       propertiesToUpdate: ["price": .keyPath("price") * 1.5 + 1, "name": .keyPath("symbol")]))
            // `/` divides as floating point; the result is truncated toward zero into the Int16.
            _ = try context.execute(BatchUpdateRequest(entityName: "Listing", propertiesToUpdate: ["rank": .keyPath("price") / 7 - 50]))
            // nil in arithmetic gives nil.
            _ = try context.execute(BatchUpdateRequest(entityName: "Listing", predicate: try FetchPredicate(format: "symbol == 'C'"),
                                                       propertiesToUpdate: ["stock": .keyPath("stock") + 1, "name": nil]))
        }
        // 16/7-50 = -47.7 → -47; 301/7-50 = -7 exactly; 451/7-50 = 14.4 → 14.
        #expect(try fixture.listings(kind) == ["A": "A 16.0 -47 1", "B": "B 301.0 -7 1", "C": "- 451.0 14 0"])
    }

    @Test("a context holding a version from before the batch meets a merge conflict", arguments: StoreKind.allCases)
    func updateBumpsVersions(_ kind: StoreKind) throws {
        let fixture = try fixture(kind)
        let holder = fixture.context()
        let listing = try holder.performAndWait {
            let listing = try holder.existingObject(with: try #require(fixture.ids["A"]))
            _ = try listing.value(forKey: "price")
            return listing
        }
        let batch = fixture.context()
        try batch.performAndWait { _ = try batch.execute(BatchUpdateRequest(entityName: "Listing", propertiesToUpdate: ["price": 11])) }
        try holder.performAndWait {
            try listing.setValue("stale", forKey: "name")
            #expect { try holder.save() } throws: { error in
                guard let error = error as? ObjectGraphError, error.code == .mergeConflict else { return false }
                return error.mergeConflicts.map(\.persistedSnapshotVersion) == [2]
            }
        }
    }

    @Test("subentities change with their parent unless excluded; a predicate through a to-many selects by the related rows",
          arguments: StoreKind.allCases)
    func updateSubentitiesAndJoins(_ kind: StoreKind) throws {
        let fixture = try fixture(kind)
        let context = fixture.context()
        try context.performAndWait {
            var trucks = BatchUpdateRequest(entityName: "Truck", propertiesToUpdate: ["load": .keyPath("load") + 3])
            trucks.resultType = .count
            #expect(try context.execute(trucks) == .count(1))
            var vehicles = BatchUpdateRequest(entityName: "Vehicle", propertiesToUpdate: ["plate": "X"])
            vehicles.resultType = .count
            #expect(try context.execute(vehicles) == .count(2))
            vehicles.includesSubentities = false
            vehicles.propertiesToUpdate = ["plate": "CAR"]
            #expect(try context.execute(vehicles) == .count(1))
            var tagged = BatchUpdateRequest(entityName: "Listing", predicate: try FetchPredicate(format: "ANY tags.name == 'hot'"),
                                            propertiesToUpdate: ["name": "hot"])
            tagged.resultType = .objectIDs
            #expect(try context.execute(tagged) == .objectIDs(ContextDidSave(updatedObjectIDs: try ids(fixture, "A", "B"))))
            context.reset()
            let plates = try context.fetch(FetchRequest<ManagedObject>(entityName: "Vehicle", predicate: nil, sortDescriptors: [FetchSort(key: "plate")]))
            #expect(try plates.map { try $0.value(forKey: "plate") as? String } == ["CAR", "X"])
        }
    }

    @Test("a batch update that would give two rows one unique key changes nothing and names the rows", arguments: StoreKind.allCases)
    func updateUniqueness(_ kind: StoreKind) throws {
        let fixture = try fixture(kind)
        let before = try fixture.listings(kind)
        let context = fixture.context()
        #expect {
            try context.performAndWait {
                try context.execute(BatchUpdateRequest(entityName: "Listing", propertiesToUpdate: ["symbol": "SAME", "name": "x"]))
            }
        } throws: { error in
            guard let error = error as? ObjectGraphError, error.code == .uniquenessConflict,
                  let conflict = error.uniquenessConflicts.first else { return false }
            return conflict.constraint == ["symbol"] && conflict.entityName == "Listing" && conflict.objectIDs.count == 3
        }
        #expect(try fixture.listings(kind) == before)
        try context.performAndWait {
            _ = try context.execute(BatchUpdateRequest(entityName: "Listing", predicate: try FetchPredicate(format: "symbol == 'A'"),
                                                       propertiesToUpdate: ["symbol": "Z"]))
        }
        #expect(try fixture.listings(kind).keys.sorted() == ["B", "C", "Z"])
    }

    @Test("a computed value an Int16 cannot hold is refused, naming the attribute, and changes nothing", arguments: StoreKind.allCases)
    func updateOutOfRange(_ kind: StoreKind) throws {
        let fixture = try fixture(kind)
        let before = try fixture.listings(kind)
        let context = fixture.context()
        #expect {
            try context.performAndWait {
                try context.execute(BatchUpdateRequest(entityName: "Listing", propertiesToUpdate: ["rank": .keyPath("price") * 1000, "name": "x"]))
            }
        } throws: { error in
            guard let error = error as? ObjectGraphError else { return false }
            return error.code == .valueOutOfRange && "\(error)".contains("rank")
        }
        #expect(try fixture.listings(kind) == before)
    }

    @Test("a batch records one history transaction with a change per row, as a save does", arguments: StoreKind.allCases)
    func history(_ kind: StoreKind) throws {
        let fixture = try fixture(kind, history: true)
        let start = try fixture.coordinator.currentPersistentHistoryToken()
        let context = fixture.context(author: "repricer")
        var request = BatchUpdateRequest(entityName: "Listing", predicate: try FetchPredicate(format: "price > 100"),
                                         propertiesToUpdate: ["name": "Acme", "rank": .keyPath("rank") + 7])
        request.resultType = .objectIDs
        let result = try context.performAndWait { try context.execute(request) }
        let updated = try #require(try fixture.coordinator.fetchHistory(.fetchHistory(after: start)).last)
        #expect(updated.author == "repricer")
        #expect(updated.changes?.map(\.changedObjectID) == [fixture.ids["B"], fixture.ids["C"]].compactMap { $0 })
        #expect(updated.changes?.allSatisfy { $0.changeType == .update && $0.updatedProperties == ["name", "rank"] } == true)
        #expect(result == .objectIDs(ContextDidSave(updatedObjectIDs: try ids(fixture, "B", "C"), historyTokens: [updated.token])))

        let none = try fixture.coordinator.currentPersistentHistoryToken()
        try context.performAndWait {
            _ = try context.execute(BatchUpdateRequest(entityName: "Listing", predicate: try FetchPredicate(format: "price < 0"),
                                                       propertiesToUpdate: ["name": "x"]))
        }
        #expect(try fixture.coordinator.currentPersistentHistoryToken() == none, "a batch that changes no row records nothing")

        try context.performAndWait {
            _ = try context.execute(BatchDeleteRequest(fetchRequest: FetchRequest<ManagedObject>(entityName: "Vehicle")))
        }
        let deleted = try #require(try fixture.coordinator.fetchHistory(.fetchHistory(after: updated.token)).last)
        #expect(Set(deleted.changes?.map(\.changedObjectID) ?? []) == (try ids(fixture, "CAR", "TRUCK")))
        #expect(deleted.changes?.allSatisfy { $0.changeType == .delete } == true)
    }

    // MARK: Delete

    @Test("a batch delete without delete rules removes the rows and their join-table rows", arguments: StoreKind.allCases)
    func deleteWithoutRules(_ kind: StoreKind) throws {
        let fixture = try fixture(kind)
        let context = fixture.context()
        var request = BatchDeleteRequest(fetchRequest: FetchRequest<ManagedObject>(entityName: "Listing",
                                                                                   predicate: try FetchPredicate(format: "price > 100")))
        request.resultType = .objectIDs
        #expect(try context.performAndWait { try context.execute(request) } == .objectIDs(ContextDidSave(deletedObjectIDs: try ids(fixture, "B", "C"))))
        #expect(try fixture.listings(kind) == ["A": "- 10.0 0 1"])
        let reader = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: try kind.coordinator(fixture.model, at: fixture.location))
        try reader.performAndWait {
            let hot = try reader.existingObject(with: try #require(fixture.ids["hot"]))
            #expect(try #require(hot.value(forKey: "listings") as? Set<ManagedObject>).map(\.objectID) == [fixture.ids["A"]])
        }
        request = BatchDeleteRequest(fetchRequest: FetchRequest<ManagedObject>(entityName: "Vehicle"))
        request.resultType = .count
        #expect(try context.performAndWait { try context.execute(request) } == .count(2))
    }

    @Test("a deny rule refuses the whole delete, naming the object and relationship; by ID it deletes once freed",
          arguments: StoreKind.allCases)
    func deleteDenied(_ kind: StoreKind) throws {
        let fixture = try fixture(kind)
        let context = fixture.context()
        let hot = try #require(fixture.ids["hot"])
        #expect {
            try context.performAndWait { try context.execute(BatchDeleteRequest(objectIDs: [hot])) }
        } throws: { error in
            guard let error = error as? ObjectGraphError, error.code == .deleteDenied else { return false }
            return "\(error)".contains("Tag.listings")
        }
        #expect(try fixture.listings(kind)["A"] == "- 10.0 0 1")
        try context.performAndWait {
            _ = try context.execute(BatchDeleteRequest(fetchRequest: FetchRequest<ManagedObject>(entityName: "Listing")))
            var request = BatchDeleteRequest(objectIDs: [hot])
            request.resultType = .count
            #expect(try context.execute(request) == .count(1))
        }
    }

    @Test("cascade and nullify rules as on SQLite: cascaded rows deleted, to-manys losing a member reported", arguments: StoreKind.allCases)
    func deleteRules(_ kind: StoreKind) throws {
        var options = StoreOptions()
        options.persistentHistoryTracking = true
        let model = StoreTestModel.make()
        let coordinator = try kind.coordinator(model, at: try kind.makeLocation(), options: options)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let (acme, updates, dow) = try context.performAndWait {
            let entities = model.entitiesByName
            let acme = ManagedObject(entity: try #require(entities["Company"]), insertInto: context)
            try acme.setValue("ACME", forKey: "symbol")
            let globex = ManagedObject(entity: try #require(entities["Company"]), insertInto: context)
            try globex.setValue("GLBX", forKey: "symbol")
            let updates = try (0..<2).map { _ in
                let update = ManagedObject(entity: try #require(entities["StockUpdate"]), insertInto: context)
                try update.setValue(acme, forKey: "company")
                return update
            }
            let dow = ManagedObject(entity: try #require(entities["MarketIndex"]), insertInto: context)
            try dow.setValue("Dow", forKey: "name")
            try dow.setValue(Set([acme, globex]), forKey: "members")
            try context.save()
            return (acme.objectID, updates.map(\.objectID), dow.objectID)
        }
        let start = try coordinator.currentPersistentHistoryToken()
        var request = BatchDeleteRequest(fetchRequest: FetchRequest<ManagedObject>(entityName: "Company",
                                                                                   predicate: try FetchPredicate(format: "symbol == 'ACME'")))
        request.resultType = .objectIDs
        let result = try context.performAndWait { try context.execute(request) }
        let transaction = try #require(try coordinator.fetchHistory(.fetchHistory(after: start)).last)
        #expect(result == .objectIDs(ContextDidSave(updatedObjectIDs: [dow], deletedObjectIDs: Set([acme] + updates),
                                                    historyTokens: [transaction.token])))
        #expect(Set(transaction.changes?.filter { $0.changeType == .delete }.map(\.changedObjectID) ?? []) == Set([acme] + updates))
        let reader = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        try reader.performAndWait {
            #expect(try reader.count(for: FetchRequest<ManagedObject>(entityName: "StockUpdate")) == 0)
            let members = try #require(try reader.existingObject(with: dow).value(forKey: "members") as? Set<ManagedObject>)
            #expect(try members.map { try $0.value(forKey: "symbol") as? String } == ["GLBX"])
        }
    }

    // MARK: Refusals

    @Test("a read-only store refuses batches", arguments: StoreKind.allCases)
    func readOnly(_ kind: StoreKind) throws {
        let fixture = try fixture(kind)
        var options = StoreOptions()
        options.isReadOnly = true
        let coordinator = try kind.coordinator(fixture.model, at: fixture.location, options: options)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        #expect(throws: PersistentStoreError.self) {
            try context.performAndWait { try context.execute(BatchUpdateRequest(entityName: "Listing", propertiesToUpdate: ["price": 1])) }
        }
        #expect(throws: PersistentStoreError.self) {
            try context.performAndWait { try context.execute(BatchDeleteRequest(fetchRequest: FetchRequest<ManagedObject>(entityName: "Listing"))) }
        }
        #expect(try fixture.listings(kind).count == 3)
    }

    @Test("bad requests throw a typed error naming what is wrong and change nothing", arguments: StoreKind.allCases)
    func badRequests(_ kind: StoreKind) throws {
        let fixture = try fixture(kind)
        let before = try fixture.listings(kind)
        let context = fixture.context()
        let cases: [(BatchUpdateRequest, ObjectGraphError.Code, String)] = [
            (BatchUpdateRequest(entityName: "Listing", propertiesToUpdate: ["nope": 1]), .unknownKey, "nope"),
            (BatchUpdateRequest(entityName: "Listing", propertiesToUpdate: ["tags": nil]), .notAnAttribute, "tags"),
            (BatchUpdateRequest(entityName: "Listing", propertiesToUpdate: [:]), .nothingToUpdate, "Listing"),
            (BatchUpdateRequest(entityName: "Listing", propertiesToUpdate: ["price": "cheap"]), .wrongValueType, "price"),
            (BatchUpdateRequest(entityName: "Nowhere", propertiesToUpdate: ["price": 1]), .unknownEntity, "Nowhere"),
        ]
        for (request, code, named) in cases {
            #expect {
                try context.performAndWait { try context.execute(request) }
            } throws: { error in
                guard let error = error as? ObjectGraphError else { return false }
                return error.code == code && "\(error)".contains(named)
            }
        }
        // A predicate on a key the entity lacks: refused before anything is written, by either store.
        let unknown = try FetchPredicate(format: "missing == 1")
        #expect(throws: (any Error).self) {
            try context.performAndWait {
                try context.execute(BatchUpdateRequest(entityName: "Listing", predicate: unknown, propertiesToUpdate: ["price": 1]))
            }
        }
        #expect(throws: (any Error).self) {
            try context.performAndWait {
                try context.execute(BatchDeleteRequest(fetchRequest: FetchRequest<ManagedObject>(entityName: "Listing", predicate: unknown)))
            }
        }
        #expect(try fixture.listings(kind) == before)
    }

    @Test("PostgreSQL refuses a batch whose predicate it cannot answer as SQLite does, saying which, and changes nothing")
    func unsupportedPredicate() throws {
        let fixture = try fixture(.postgreSQL)
        let before = try fixture.listings(.postgreSQL)
        let context = fixture.context()
        let predicate = try FetchPredicate(format: "name ==[d] 'cafe'")
        for run in [
            { _ = try context.execute(BatchUpdateRequest(entityName: "Listing", predicate: predicate, propertiesToUpdate: ["price": 1])) },
            { _ = try context.execute(BatchDeleteRequest(fetchRequest: FetchRequest<ManagedObject>(entityName: "Listing", predicate: predicate))) },
            { _ = try context.execute(BatchDeleteRequest(fetchRequest: FetchRequest<ManagedObject>(entityName: "Tag", predicate: predicate))) },
        ] as [() throws -> Void] {
            #expect {
                try context.performAndWait { try run() }
            } throws: { error in
                guard let error = error as? ObjectGraphError else { return false }
                return error.code == .predicateDoesNotCompile && "\(error)".contains("[d]")
            }
        }
        #expect(try fixture.listings(.postgreSQL) == before)
    }
}
