import DataStackPostgreSQL
import Foundation
import ObjectGraph
import Testing

/// Batch inserts on the SQLite store and the PostgreSQL store alike: rows,
/// defaults, keys, results, uniqueness by the merge policy and history.
@Suite("Batch insert contract", .serialized)
struct BatchInsertContractTests {
    static func model() -> ManagedObjectModel {
        let listing = EntityDescription(name: "Listing", properties: [
            AttributeDescription(name: "symbol", type: .string, isOptional: false),
            AttributeDescription(name: "name", type: .string),
            AttributeDescription(name: "price", type: .double, isOptional: false, defaultValue: .double(0)),
            AttributeDescription(name: "rank", type: .integer16, isOptional: false, defaultValue: .integer(3)),
        ])
        listing.uniquenessConstraints = [["symbol"]]
        let seat = EntityDescription(name: "Seat", properties: [
            AttributeDescription(name: "row", type: .string, isOptional: false),
            AttributeDescription(name: "number", type: .integer32, isOptional: false, defaultValue: .integer(0)),
        ])
        seat.uniquenessConstraints = [["row", "number"]]
        let vehicle = EntityDescription(name: "Vehicle", properties: [AttributeDescription(name: "plate", type: .string)])
        vehicle.uniquenessConstraints = [["plate"]]
        let car = EntityDescription(name: "Car", properties: [
            AttributeDescription(name: "seats", type: .integer16, isOptional: false, defaultValue: .integer(4)),
        ])
        let truck = EntityDescription(name: "Truck", properties: [
            AttributeDescription(name: "load", type: .integer64, isOptional: false, defaultValue: .integer(0)),
        ])
        vehicle.subentities = [car, truck]
        return ManagedObjectModel(entities: [listing, seat, vehicle, car, truck])
    }

    struct Fixture {
        let coordinator: PersistentStoreCoordinator
        let location: URL
        let model: ManagedObjectModel
        let kind: StoreKind

        func context(_ policy: MergePolicy = .error) -> ManagedObjectContext {
            let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
            context.mergePolicy = policy
            return context
        }

        /// "symbol name price rank" of every listing, sorted, as a fresh coordinator reads them.
        func listings() throws -> [String] {
            let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: try kind.coordinator(model, at: location))
            return try context.performAndWait {
                try context.fetch(FetchRequest<ManagedObject>(entityName: "Listing")).map { listing in
                    let symbol = try #require(listing.value(forKey: "symbol") as? String)
                    let name = try listing.value(forKey: "name") as? String ?? "-"
                    return "\(symbol) \(name) \(try #require(listing.value(forKey: "price") as? Double)) \(try #require(listing.value(forKey: "rank") as? Int))"
                }.sorted()
            }
        }

        /// Saves listings through a context; returns their IDs.
        func save(_ listings: [(String, Double)]) throws -> [ObjectID] {
            let context = context()
            return try context.performAndWait {
                let objects = try listings.map { symbol, price in
                    let listing = ManagedObject(entity: try #require(model.entitiesByName["Listing"]), insertInto: context)
                    try listing.setValue(symbol, forKey: "symbol")
                    try listing.setValue(price, forKey: "price")
                    return listing
                }
                try context.save()
                return objects.map(\.objectID)
            }
        }

        func execute(_ request: BatchInsertRequest, _ policy: MergePolicy = .error) throws -> BatchResult {
            let context = context(policy)
            return try context.performAndWait { try context.execute(request) }
        }

        func error(_ request: BatchInsertRequest, _ policy: MergePolicy = .error) -> (any Error)? {
            do { _ = try execute(request, policy) } catch { return error }
            return nil
        }
    }

    private func fixture(_ kind: StoreKind, history: Bool = false) throws -> Fixture {
        var options = StoreOptions()
        options.persistentHistoryTracking = history
        let model = Self.model()
        let location = try kind.makeLocation()
        return Fixture(coordinator: try kind.coordinator(model, at: location, options: options), location: location, model: model, kind: kind)
    }

    @Test("rows are inserted with the model's defaults, by dictionaries or a handler, and reported as asked", arguments: StoreKind.allCases)
    func inserts(_ kind: StoreKind) throws {
        let fixture = try fixture(kind)
        var request = BatchInsertRequest(entityName: "Listing", objects: [["symbol": "A", "price": 1.5], ["symbol": "B", "name": "bee", "rank": 7]])
        request.resultType = .objectIDs
        guard case .objectIDs(let save) = try fixture.execute(request) else { Issue.record("no IDs"); return }
        #expect(save.insertedObjectIDs.count == 2 && save.updatedObjectIDs.isEmpty)
        #expect(try fixture.listings() == ["A - 1.5 3", "B bee 0.0 7"])
        // A handler's rows, more than one block of them.
        var handler = BatchInsertRequest(entityName: "Listing") { index, row in
            guard index < 2_500 else { return true }
            row["symbol"] = "H\(index)"
            row["price"] = Double(index)
            return false
        }
        handler.resultType = .count
        #expect(try fixture.execute(handler) == .count(2_500))
        #expect(try fixture.listings().count == 2_502)
        // New objects saved afterwards take keys after the batch's.
        let saved = try fixture.save([("S", 1)])
        #expect(try fixture.listings().contains("S - 1.0 3"))
        #expect(!save.insertedObjectIDs.contains(saved[0]))
        // A context reads the inserted objects.
        let reader = fixture.context()
        try reader.performAndWait {
            let object = try reader.existingObject(with: try #require(save.insertedObjectIDs.first))
            let symbol = try #require(object.value(forKey: "symbol") as? String)
            #expect(["A", "B"].contains(symbol))
        }
    }

    @Test("a key already stored fails naming the constraint, values and stored object, and changes nothing", arguments: StoreKind.allCases)
    func duplicateOfStored(_ kind: StoreKind) throws {
        let fixture = try fixture(kind)
        let ids = try fixture.save([("A", 10)])
        let error = fixture.error(BatchInsertRequest(entityName: "Listing", objects: [["symbol": "B"], ["symbol": "A", "price": 1]]))
        #expect(error as? ObjectGraphError == .duplicateKey(entity: "Listing", constraint: ["symbol"], values: [.string("A")], row: 1,
                                                             storedObjectID: ids[0]), "\(String(describing: error))")
        #expect(try fixture.listings() == ["A - 10.0 3"])
        // The next request starts clean.
        #expect(try fixture.execute(BatchInsertRequest(entityName: "Listing", objects: [["symbol": "C"]])) == .statusOnly)
        #expect(try fixture.listings() == ["A - 10.0 3", "C - 0.0 3"])
    }

    @Test("a key repeated within the request fails naming the later row", arguments: StoreKind.allCases)
    func duplicateWithinRequest(_ kind: StoreKind) throws {
        let fixture = try fixture(kind)
        let error = fixture.error(BatchInsertRequest(entityName: "Seat", objects: [
            ["row": "a", "number": 1], ["row": "a", "number": 2], ["row": "a", "number": 1],
        ]))
        #expect(error as? ObjectGraphError == .duplicateKey(entity: "Seat", constraint: ["row", "number"], values: [.string("a"), .integer(1)],
                                                             row: 2, storedObjectID: nil), "\(String(describing: error))")
    }

    @Test("object trump upserts the given values, bumps the stored row's version and reports it updated",
          arguments: StoreKind.allCases, [MergePolicy.mergeByPropertyObjectTrump, .overwrite])
    func upsert(_ kind: StoreKind, policy: MergePolicy) throws {
        let fixture = try fixture(kind)
        let writer = fixture.context()
        let (stored, listing) = try writer.performAndWait {
            let listing = ManagedObject(entity: try #require(fixture.model.entitiesByName["Listing"]), insertInto: writer)
            try listing.setValue("A", forKey: "symbol")
            try listing.setValue("kept", forKey: "name")
            try listing.setValue(10.0, forKey: "price")
            try writer.save()
            return (listing.objectID, listing)
        }
        var request = BatchInsertRequest(entityName: "Listing", objects: [["symbol": "A", "price": 11], ["symbol": "N", "price": 1]])
        request.resultType = .objectIDs
        guard case .objectIDs(let save) = try fixture.execute(request, policy) else { Issue.record("no IDs"); return }
        #expect(save.updatedObjectIDs == [stored])
        #expect(save.insertedObjectIDs.count == 1 && !save.insertedObjectIDs.contains(stored))
        #expect(try fixture.listings() == ["A kept 11.0 3", "N - 1.0 3"])
        try writer.performAndWait {
            try listing.setValue("stale", forKey: "name")
            #expect(throws: ObjectGraphError.self) { try writer.save() }
        }
        // Duplicates within one request collapse into one inserted row, the later row's values merged in.
        var twice = BatchInsertRequest(entityName: "Listing", objects: [["symbol": "D", "price": 1], ["symbol": "D", "price": 2, "name": "named"]])
        twice.resultType = .objectIDs
        guard case .objectIDs(let collapsed) = try fixture.execute(twice, policy) else { Issue.record("no IDs"); return }
        #expect(collapsed.insertedObjectIDs.count == 1 && collapsed.updatedObjectIDs.isEmpty)
        #expect(try fixture.listings().contains("D named 2.0 3"))
    }

    @Test("store trump keeps the stored row and the first of repeated rows", arguments: StoreKind.allCases)
    func keep(_ kind: StoreKind) throws {
        let fixture = try fixture(kind)
        _ = try fixture.save([("A", 10)])
        var request = BatchInsertRequest(entityName: "Listing", objects: [
            ["symbol": "A", "price": 11, "name": "new"], ["symbol": "N"], ["symbol": "N", "price": 5],
        ])
        request.resultType = .objectIDs
        guard case .objectIDs(let save) = try fixture.execute(request, .mergeByPropertyStoreTrump) else { Issue.record("no IDs"); return }
        #expect(save.updatedObjectIDs.isEmpty && save.insertedObjectIDs.count == 1)
        #expect(try fixture.listings() == ["A - 10.0 3", "N - 0.0 3"])
    }

    @Test("an upsert never overwrites a row of another entity of the hierarchy", arguments: StoreKind.allCases)
    func upsertOtherEntity(_ kind: StoreKind) throws {
        let fixture = try fixture(kind)
        let context = fixture.context()
        let truck = try context.performAndWait {
            let truck = ManagedObject(entity: try #require(fixture.model.entitiesByName["Truck"]), insertInto: context)
            try truck.setValue("X", forKey: "plate")
            try context.save()
            return truck.objectID
        }
        let error = fixture.error(BatchInsertRequest(entityName: "Car", objects: [["plate": "Y"], ["plate": "X", "seats": 9]]),
                                  .mergeByPropertyObjectTrump)
        #expect(error as? ObjectGraphError == .duplicateKey(entity: "Vehicle", constraint: ["plate"], values: [.string("X")], row: 1,
                                                             storedObjectID: truck), "\(String(describing: error))")
        let reader = fixture.context()
        #expect(try reader.performAndWait { try reader.count(for: FetchRequest<ManagedObject>(entityName: "Car")) } == 0)
    }

    @Test("history records one transaction: an insert per row, an update per upserted stored row with its columns",
          arguments: StoreKind.allCases)
    func history(_ kind: StoreKind) throws {
        let fixture = try fixture(kind, history: true)
        let stored = try fixture.save([("A", 10)])
        let start = try fixture.coordinator.currentPersistentHistoryToken()
        var request = BatchInsertRequest(entityName: "Listing", objects: [["symbol": "A", "price": 11], ["symbol": "N"], ["symbol": "M"]])
        request.resultType = .objectIDs
        guard case .objectIDs(let save) = try fixture.execute(request, .mergeByPropertyObjectTrump) else { Issue.record("no IDs"); return }
        let transactions = try fixture.coordinator.fetchHistory(.fetchHistory(after: start))
        #expect(transactions.count == 1)
        let changes = transactions.first?.changes ?? []
        #expect(Set(changes.filter { $0.changeType == .insert }.map(\.changedObjectID)) == save.insertedObjectIDs)
        #expect(changes.filter { $0.changeType == .update }.map(\.changedObjectID) == stored)
        #expect(changes.first { $0.changeType == .update }?.updatedProperties == ["price"])
        #expect(save.historyTokens == transactions.map(\.token))
        // A request that fails records nothing.
        let after = try fixture.coordinator.currentPersistentHistoryToken()
        _ = fixture.error(BatchInsertRequest(entityName: "Listing", objects: [["symbol": "Z"], ["symbol": "A"]]))
        #expect(try fixture.coordinator.currentPersistentHistoryToken() == after)
    }

    @Test("bad rows throw a typed error naming the row and change nothing", arguments: StoreKind.allCases)
    func badInput(_ kind: StoreKind) throws {
        let fixture = try fixture(kind)
        for (objects, code) in [
            ([["symbol": "A"], ["symbol": "B", "nope": 1]], ObjectGraphError.Code.unknownKey),
            ([["symbol": "A"], ["price": 1.0]], .missingValue),
            ([["symbol": "A"], ["symbol": "B", "rank": 70_000]], .valueOutOfRange),
            ([["symbol": "A"], ["symbol": "B", "price": "cheap"]], .wrongValueType),
        ] as [([[String: any Sendable]], ObjectGraphError.Code)] {
            let error = fixture.error(BatchInsertRequest(entityName: "Listing", objects: objects))
            #expect((error as? ObjectGraphError)?.code == code, "\(String(describing: error))")
        }
        #expect(try fixture.listings().isEmpty)
    }
}
