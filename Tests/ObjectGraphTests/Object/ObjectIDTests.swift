import Foundation
import ObjectGraph
import Testing
import DataStackStores

/// Object IDs: temporary and permanent, equality across coordinators, URIs.
@Suite struct ObjectIDTests {
    @Test(arguments: allStoreTypes)
    func anInsertedObjectHasATemporaryIDUntilSaved(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let context = stack.newContext()
        try context.performAndWait {
            let first = Company(context: context)
            first.symbol = "A"
            let second = Company(context: context)
            second.symbol = "B"
            let temporary = first.objectID
            #expect(temporary.isTemporaryID)
            #expect(temporary.primaryKey == nil)
            #expect(temporary.storeIdentifier == nil)
            #expect(temporary.entityName == "Company")
            #expect(temporary != second.objectID)

            try context.save()
            let permanent = first.objectID
            #expect(!permanent.isTemporaryID)
            #expect(permanent != temporary)
            #expect(permanent.entityName == "Company")
            #expect(permanent.storeIdentifier == stack.coordinator.persistentStores[0].identifier)
            #expect(Set([first.objectID.primaryKey, second.objectID.primaryKey]) == [1, 2])
        }
    }

    @Test func obtainPermanentIDsGivesIDsBeforeTheSave() throws {
        let stack = try TestStack(type: .sqlite)
        let context = stack.newContext()
        try context.performAndWait {
            let company = Company(context: context)
            company.symbol = "A"
            try context.obtainPermanentIDs(for: [company])
            let id = company.objectID
            #expect(!id.isTemporaryID)
            #expect(company.isInserted)
            #expect(context.registeredObject(for: id) === company)
            try context.save()
            #expect(company.objectID == id)
        }
        #expect(try RawStore.int(stack.storeURL, "SELECT Z_PK FROM ZCOMPANY") == 1)
    }

    @Test func equalIDsForTheSameRowThroughTwoCoordinators() throws {
        let stack = try TestStack(type: .sqlite)
        let ids = try stack.seedCompanies(["A", "B"])
        let second = try stack.secondCoordinator()
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: second)
        let fetched = try context.performAndWait {
            var request = FetchRequest<ObjectID>(entityName: "Company")
            request.resultType = .managedObjectID
            request.sortDescriptors = [FetchSort(key: "symbol")]
            return try context.fetch(request)
        }
        #expect(fetched == ids)
        #expect(fetched.map(\.hashValue) == ids.map(\.hashValue))
        #expect(Set(fetched + ids).count == 2)
        #expect(fetched[0] != fetched[1])
        let viaURI = try #require(second.managedObjectID(forURIRepresentation: ids[0].uriRepresentation()))
        #expect(viaURI == ids[0])
    }

    @Test func sameKeyInAnotherStoreOrEntityIsAnotherID() throws {
        let first = try TestStack(type: .sqlite)
        let second = try TestStack(type: .sqlite)
        let a = try first.seedCompanies(["A"])[0]
        let b = try second.seedCompanies(["A"])[0]
        #expect(a.primaryKey == b.primaryKey)
        #expect(a != b)

        let store = first.coordinator.persistentStores[0]
        let model = first.model
        let company = store.newObjectID(for: try #require(model.entitiesByName["Company"]), primaryKey: 1)
        let update = store.newObjectID(for: try #require(model.entitiesByName["StockUpdate"]), primaryKey: 1)
        #expect(company == a)
        #expect(company != update)
        // Every table counts keys from 1: equal keys of two entities must not share a hash.
        #expect(company.hashValue != update.hashValue)
        #expect(company.hashValue == a.hashValue)
    }

    @Test func setsDictionariesAndCompositeKeysAgreeOnIDs() throws {
        let first = try TestStack(type: .sqlite)
        let store = first.coordinator.persistentStores[0]
        let company = try #require(first.model.entitiesByName["Company"])
        let update = try #require(first.model.entitiesByName["StockUpdate"])
        // The same rows named through another copy of the model: equal IDs.
        let otherModel = TestModel.make()
        let otherCompany = try #require(otherModel.entitiesByName["Company"])
        let otherUpdate = try #require(otherModel.entitiesByName["StockUpdate"])
        var ids: [ObjectID] = []
        var twins: [ObjectID] = []
        for key in Int64(1)...2_000 {
            ids += [store.newObjectID(for: company, primaryKey: key), store.newObjectID(for: update, primaryKey: key)]
            twins += [store.newObjectID(for: otherCompany, primaryKey: key), store.newObjectID(for: otherUpdate, primaryKey: key)]
        }
        let temporaries = (0..<500).map { _ in ObjectID.temporary(for: company) }
        ids += temporaries
        twins += temporaries

        // A set and a dictionary (the ID's own one-word hash) ...
        let set = Set(ids)
        #expect(set.count == ids.count)
        #expect(twins.allSatisfy(set.contains))
        let positions = Dictionary(uniqueKeysWithValues: ids.enumerated().map { ($1, $0) })
        #expect(twins.enumerated().allSatisfy { positions[$1] == $0 })
        // ... and keys that hash an ID through a `Hasher` (`hash(into:)`) agree.
        struct Pair: Hashable { var id: ObjectID; var tag: Int }
        let pairs = Set(ids.map { Pair(id: $0, tag: 1) })
        #expect(twins.allSatisfy { pairs.contains(Pair(id: $0, tag: 1)) })
        #expect(!pairs.contains(Pair(id: ids[0], tag: 2)))
        #expect(zip(ids, twins).allSatisfy { $0.hashValue == $1.hashValue })
    }

    @Test(arguments: allStoreTypes)
    func aPermanentURINamesStoreEntityAndKey(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let id = try stack.seedCompanies(["A"])[0]
        let uuid = stack.coordinator.persistentStores[0].identifier
        #expect(UUID(uuidString: uuid) != nil)
        #expect(id.uriRepresentation().absoluteString == "x-coredata://\(uuid)/Company/p1")
        #expect(id.description == "x-coredata://\(uuid)/Company/p1")
    }

    @Test func aTemporaryURIHasNoStoreAndAUUIDKey() throws {
        let stack = try TestStack(type: .inMemory)
        let context = stack.newContext()
        context.performAndWait {
            let first = Company(context: context)
            let second = Company(context: context)
            let uri = first.objectID.uriRepresentation().absoluteString
            #expect(uri.hasPrefix("x-coredata:///Company/t"))
            #expect(UUID(uuidString: String(uri.dropFirst("x-coredata:///Company/t".count))) != nil)
            #expect(uri == first.objectID.uriRepresentation().absoluteString, "stable for one ID")
            #expect(uri != second.objectID.uriRepresentation().absoluteString)
            #expect(stack.coordinator.managedObjectID(forURIRepresentation: first.objectID.uriRepresentation()) == nil)
        }
    }

    @Test(arguments: allStoreTypes)
    func aURIRoundTripsToTheSameIDAndObject(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let ids = try stack.seedCompanies(["A", "B", "C"])
        let context = stack.newContext()
        try context.performAndWait {
            for id in ids {
                let back = try #require(stack.coordinator.managedObjectID(forURIRepresentation: id.uriRepresentation()))
                #expect(back == id)
                #expect(back.entity === id.entity)
                let object = try context.existingObject(with: back)
                #expect(object.objectID == id)
                #expect(context.object(with: id) === object)
            }
        }
    }

    static let garbageURIs: [String] = [
        "", "x-coredata:", "x-coredata://", "x-coredata:///", "x-coredata://STORE", "x-coredata://STORE/Company",
        "x-coredata://STORE/Company/", "x-coredata://STORE/Company/p", "x-coredata://STORE/Company/p0",
        "x-coredata://STORE/Company/p-1", "x-coredata://STORE/Company/pabc", "x-coredata://STORE/Company/1",
        "x-coredata://STORE/Company/p99999999999999999999999", "x-coredata://STORE/Nope/p1",
        "x-coredata://STORE/Company/p1/extra", "x-coredata://OTHER-STORE/Company/p1", "x-coredata:///Company/p1",
        "x-coredata:///Company/t0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0", "https://STORE/Company/p1",
        "file:///tmp/Company/p1", "x-coredata://STORE/%00/p1",
        "mailto:someone@example.com", "x-coredata://STORE/Company/t1", "X-COREDATA://STORE//p1",
    ]

    @Test(arguments: allStoreTypes)
    func anyOtherURIGivesNil(type: StoreType) throws {
        let stack = try TestStack(type: type)
        try stack.seedCompanies(["A"])
        let store = stack.coordinator.persistentStores[0].identifier
        for text in Self.garbageURIs {
            guard let url = URL(string: text.replacingOccurrences(of: "STORE", with: store)) else { continue }
            #expect(stack.coordinator.managedObjectID(forURIRepresentation: url) == nil, "\(text)")
        }
        // The well-formed URI of a row that does not exist is still an ID (as in Core Data);
        // fetching it reports the missing row.
        let missing = try #require(URL(string: "x-coredata://\(store)/Company/p999"))
        let id = try #require(stack.coordinator.managedObjectID(forURIRepresentation: missing))
        let context = stack.newContext()
        _ = context.performAndWait {
            #expect(throws: ObjectGraphError.objectNotFound(id)) { try context.existingObject(with: id) }
        }
    }
}
