import Foundation
@testable import ObjectGraph
import Testing
@testable import DataStackStores

/// Every bad batch request throws a typed error saying what and where, and
/// leaves every row as it was.
@Suite struct BatchBadInputTests {
    /// Runs a request that must fail on a store holding two listings and
    /// returns its error, after checking that no row changed.
    private func failure(on type: StoreType, sourceLocation: SourceLocation = #_sourceLocation,
                         _ body: (ManagedObjectContext) throws -> BatchResult) throws -> (any Error)? {
        let graph = try GraphStack(type)
        _ = try graph.saveListings([("A", 1), ("B", 2)])
        let before = try graph.rows()
        let context = graph.context()
        var caught: (any Error)?
        context.performAndWait {
            do {
                let result = try body(context)
                Issue.record("no error; the request returned \(result)", sourceLocation: sourceLocation)
            } catch {
                caught = error
            }
        }
        #expect(try graph.rows() == before, "rows changed", sourceLocation: sourceLocation)
        return caught
    }

    private func update(_ properties: [String: FetchExpression], entity: String = "Listing",
                        where format: String? = nil) throws -> BatchUpdateRequest {
        BatchUpdateRequest(entityName: entity, predicate: try format.map { try FetchPredicate(format: $0) }, propertiesToUpdate: properties)
    }

    @Test(arguments: allStoreTypes)
    func anUnknownEntity(type: StoreType) throws {
        let request = try update(["price": 1], entity: "Nothing")
        let error = try failure(on: type) { try $0.execute(request) }
        #expect(error as? ObjectGraphError == .unknownEntity("Nothing"))
        let delete = BatchDeleteRequest(fetchRequest: FetchRequest<ManagedObject>(entityName: "Nothing"))
        #expect(try failure(on: type) { try $0.execute(delete) } as? ObjectGraphError == .unknownEntity("Nothing"))
    }

    @Test(arguments: allStoreTypes)
    func anUnknownKey(type: StoreType) throws {
        let request = try update(["prize": 1])
        #expect(try failure(on: type) { try $0.execute(request) } as? ObjectGraphError == .unknownKey("prize", entity: "Listing"))
        let arithmetic = try update(["price": .keyPath("prize") + 1])
        #expect(try failure(on: type) { try $0.execute(arithmetic) } as? ObjectGraphError == .unknownKey("prize", entity: "Listing"))
    }

    @Test(arguments: allStoreTypes)
    func aRelationshipIsNotAnAttribute(type: StoreType) throws {
        let request = try update(["quotes": nil])
        #expect(try failure(on: type) { try $0.execute(request) } as? ObjectGraphError == .notAnAttribute(key: "quotes", entity: "Listing"))
    }

    @Test(arguments: allStoreTypes)
    func aValueOfTheWrongType(type: StoreType) throws {
        let request = try update(["price": "cheap"])
        let error = try failure(on: type) { try $0.execute(request) }
        #expect(error as? ObjectGraphError == .wrongValueType(key: "price", entity: "Listing", expected: AttributeType.double.valueDescription, actual: "String"))
        // Arithmetic is type-checked as in a fetch, the error naming the key.
        let arithmetic = try update(["price": .keyPath("symbol") * 2])
        let notNumbers = try failure(on: type) { try $0.execute(arithmetic) } as? FetchExpressionError
        #expect(notNumbers?.code == .needsNumbers && notNumbers?.location == "propertiesToUpdate['price']", "\(String(describing: notNumbers))")
        #expect(notNumbers?.message.contains("symbol is string") == true, "\(String(describing: notNumbers))")
        // A computed value the attribute cannot hold is the wrong type, as a constant is.
        let onText = try update(["symbol": .keyPath("price") * 2])
        #expect(try failure(on: type) { try $0.execute(onText) } as? ObjectGraphError
            == .wrongValueType(key: "symbol", entity: "Listing", expected: AttributeType.string.valueDescription, actual: "(price * 2) (double)"))
    }

    @Test(arguments: allStoreTypes)
    func aValueNotComputedFromTheRowItself(type: StoreType) throws {
        // An UPDATE sets each row from its own columns: no aggregate, no join.
        let values: [(entity: String, key: String, value: FetchExpression)] = [
            ("Listing", "price", .sum(.keyPath("price"))),
            ("Listing", "price", .keyPath("price") + .count()),
            ("Quote", "value", .keyPath("listing.price") * 2),
            ("Quote", "value", .keyPath("listing")),
            ("Listing", "price", .evaluatedObject),
        ]
        for (entity, key, value) in values {
            let request = try update([key: value], entity: entity)
            #expect(try failure(on: type) { try $0.execute(request) } as? ObjectGraphError
                == .notComputedFromTheRow(key: key, entity: entity, expression: "\(value)"))
        }
        #expect(ObjectGraphError.notComputedFromTheRow(key: "value", entity: "Quote", expression: "(listing.price * 2)").description
            == "the new value of Quote.value, (listing.price * 2), must be computed from the row's own attributes: "
            + "a batch update cannot join another table or aggregate rows")
    }

    @Test(arguments: allStoreTypes)
    func aPredicateThatDoesNotCompile(type: StoreType) throws {
        for format in ["prize > 1", "price > $limit"] {
            let request = try update(["price": 1], where: format)
            let error = try failure(on: type) { try $0.execute(request) }
            guard let error = error as? ObjectGraphError, error.code == .predicateDoesNotCompile else {
                Issue.record("\(format): \(String(describing: error))")
                continue
            }
            #expect(error.entityName == "Listing" && error.message.contains(format.prefix(5)), "\(error)")
            let delete = BatchDeleteRequest(fetchRequest: FetchRequest<ManagedObject>(entityName: "Listing", predicate: try FetchPredicate(format: format)))
            #expect((try failure(on: type) { try $0.execute(delete) } as? ObjectGraphError)?.code == .predicateDoesNotCompile, "\(format)")
        }
    }

    @Test(arguments: allStoreTypes)
    func aReadOnlyStore(type: StoreType) throws {
        let graph = try GraphStack(type)
        let ids = try graph.saveListings([("A", 1)])
        var options = StoreOptions()
        options.isReadOnly = true
        let coordinator = PersistentStoreCoordinator(managedObjectModel: GraphTestModel.make())
        try coordinator.addPersistentStore(type: type, at: type == .sqlite ? graph.storeURL : nil, options: options)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let before = try graph.rows()
        let requests: [(ManagedObjectContext) throws -> BatchResult] = [
            { try $0.execute(BatchUpdateRequest(entityName: "Listing", propertiesToUpdate: ["price": 5])) },
            { try $0.execute(BatchDeleteRequest(fetchRequest: FetchRequest<ManagedObject>(entityName: "Listing"))) },
            { try $0.execute(BatchDeleteRequest(objectIDs: type == .sqlite ? ids : [])) },
        ]
        for (index, request) in requests.enumerated() where type == .sqlite || index < 2 {
            let error = context.performAndWait { () -> (any Error)? in
                do { _ = try request(context) } catch { return error }
                return nil
            }
            #expect((error as? PersistentStoreError)?.code == .readOnly, "request \(index): \(String(describing: error))")
        }
        #expect(try graph.rows() == before)
    }

    @Test func aStoreThatDoesNotRunBatchRequests() throws {
        StoreType.register(JSONFileStore.storeType)
        let directory = TemporaryDirectory()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: GraphTestModel.make())
        try coordinator.addPersistentStore(type: #require(StoreType.named("JSONFile")), at: directory.file("Store.json"))
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let error = context.performAndWait { () -> (any Error)? in
            do { _ = try context.execute(BatchUpdateRequest(entityName: "Listing", propertiesToUpdate: ["price": 1])) } catch { return error }
            return nil
        }
        #expect(error as? ObjectGraphError == .unsupportedStore(type: "JSONFile", entity: "Listing"))
    }

    @Test(arguments: allStoreTypes)
    func anUpdateThatSetsNothing(type: StoreType) throws {
        let request = try update([:])
        let error = try failure(on: type) { try $0.execute(request) }
        #expect(error as? ObjectGraphError == .nothingToUpdate(entity: "Listing"), "\(String(describing: error))")
    }

    /// Two stores hold the entity (or the IDs): one transaction cannot span them,
    /// so the request is refused before either changes.
    @Test func aRequestThatWouldChangeTwoStores() throws {
        let directory = TemporaryDirectory()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: GraphTestModel.make())
        for name in ["One.sqlite", "Two.sqlite"] { try coordinator.addPersistentStore(type: .sqlite, at: directory.file(name)) }
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let errors = context.performAndWait { () -> [(any Error)?] in
            let requests: [() throws -> BatchResult] = [
                { try context.execute(BatchUpdateRequest(entityName: "Listing", propertiesToUpdate: ["price": 1])) },
                { try context.execute(BatchDeleteRequest(fetchRequest: FetchRequest<ManagedObject>(entityName: "Listing"))) },
            ]
            return requests.map { request in
                do { _ = try request() } catch { return error }
                return nil
            }
        }
        for error in errors {
            #expect(error as? ObjectGraphError == .severalStores(entity: "Listing", stores: 2), "\(String(describing: error))")
        }
    }

    /// A computed value a narrower integer cannot hold is refused like a
    /// constant would be, and nothing is written (stored, it would read back
    /// truncated to another number).
    @Test(arguments: allStoreTypes)
    func aComputedValueTooBigForItsInteger(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        try context.performAndWait {
            let car = ManagedObject(entity: try #require(context.persistentStoreCoordinator?.managedObjectModel.entitiesByName["Car"]),
                                    insertInto: context)
            try car.setValue("CAR-1", forKey: "plate")
            try car.setValue(30, forKey: "seats")
            try context.save()
        }
        let before = try graph.rows()
        let request = BatchUpdateRequest(entityName: "Car", propertiesToUpdate: ["seats": .keyPath("seats") * 100_000])
        let error = context.performAndWait { () -> (any Error)? in
            do { _ = try context.execute(request) } catch { return error }
            return nil
        }
        #expect(error as? ObjectGraphError == .valueOutOfRange(key: "seats", entity: "Car", value: "3000000", type: .integer16),
                "\(String(describing: error))")
        #expect(try graph.rows() == before)
    }
}
