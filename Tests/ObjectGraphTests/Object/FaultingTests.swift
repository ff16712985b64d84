import Foundation
import ObjectGraph
import Testing
import DataStackStores

/// Faults: returned by fetches, fired once on first access, in batches, and
/// turned into deleted objects when their row is gone.
@Suite struct FaultingTests {
    private func seedTracked(_ stack: TestStack, titles: [String]) throws -> [ObjectID] {
        let context = stack.newContext()
        return try context.performAndWait {
            let objects = titles.map { title in
                let tracked = Tracked(context: context)
                tracked.title = title
                return tracked
            }
            try context.save()
            return objects.map(\.objectID)
        }
    }

    private func sortedRequest(faults: Bool = true, batchSize: Int = 0) -> FetchRequest<Tracked> {
        var request = FetchRequest<Tracked>()
        request.sortDescriptors = [FetchSort(key: "title")]
        request.returnsObjectsAsFaults = faults
        request.fetchBatchSize = batchSize
        return request
    }

    @Test(arguments: allStoreTypes)
    func aFetchReturnsFaultsThatFireOnceWithTheRightValues(type: StoreType) throws {
        let stack = try TestStack(type: type, model: EngineTestModel.make())
        _ = try seedTracked(stack, titles: ["a", "b", "c"])
        let context = stack.newContext()
        try context.performAndWait {
            let objects = try context.fetch(sortedRequest())
            #expect(objects.count == 3)
            #expect(objects.allSatisfy { $0.isFault })
            #expect(objects.allSatisfy { $0.calls.isEmpty })

            #expect(objects[1].title == "b")
            #expect(!objects[1].isFault)
            #expect(objects[0].isFault && objects[2].isFault, "only the touched fault fires")
            #expect(objects[1].title == "b")
            _ = try objects[1].value(forKey: "title")
            #expect(objects[1].calls == ["awakeFromFetch"])

            #expect(objects.map(\.title) == ["a", "b", "c"])
            #expect(objects.allSatisfy { $0.count(of: "awakeFromFetch") == 1 })
        }
    }

    @Test(arguments: allStoreTypes)
    func aFetchWithoutFaultsReturnsLoadedObjects(type: StoreType) throws {
        let stack = try TestStack(type: type, model: EngineTestModel.make())
        _ = try seedTracked(stack, titles: ["a", "b"])
        let context = stack.newContext()
        try context.performAndWait {
            let objects = try context.fetch(sortedRequest(faults: false))
            #expect(objects.allSatisfy { !$0.isFault })
            #expect(objects.allSatisfy { $0.calls == ["awakeFromFetch"] })
            #expect(objects.map(\.title) == ["a", "b"])
            #expect(objects.allSatisfy { $0.calls.count == 1 })
        }
    }

    @Test(arguments: allStoreTypes)
    func aRegisteredLoadedObjectIsNotTurnedBackIntoAFaultByAFetch(type: StoreType) throws {
        let stack = try TestStack(type: type, model: EngineTestModel.make())
        _ = try seedTracked(stack, titles: ["a"])
        let context = stack.newContext()
        try context.performAndWait {
            let loaded = try context.fetch(sortedRequest(faults: false))[0]
            loaded.title = "unsaved"
            let again = try context.fetch(sortedRequest(faults: true))[0]
            #expect(again === loaded)
            #expect(!again.isFault)
            #expect(again.title == "unsaved")
        }
    }

    @Test(arguments: allStoreTypes)
    func aBatchedFetchFiresOneBatchAtATime(type: StoreType) throws {
        let stack = try TestStack(type: type, model: EngineTestModel.make())
        _ = try seedTracked(stack, titles: ["a", "b", "c", "d", "e", "f", "g"])
        let context = stack.newContext()
        try context.performAndWait {
            let objects = try context.fetch(sortedRequest(batchSize: 3))
            #expect(objects.count == 7)
            #expect(objects.allSatisfy { $0.isFault })

            #expect(objects[0].title == "a")
            #expect(objects[0..<3].allSatisfy { !$0.isFault }, "the first batch fired together")
            #expect(objects[3..<7].allSatisfy { $0.isFault })

            #expect(objects[4].title == "e")
            #expect(objects[3..<6].allSatisfy { !$0.isFault })
            #expect(objects[6].isFault)

            #expect(objects.map(\.title) == ["a", "b", "c", "d", "e", "f", "g"])
            #expect(objects.allSatisfy { $0.count(of: "awakeFromFetch") == 1 })
        }
    }

    @Test(arguments: allStoreTypes)
    func aFaultWhoseRowWasDeletedBecomesADeletedObject(type: StoreType) throws {
        let stack = try TestStack(type: type, model: EngineTestModel.make())
        let ids = try seedTracked(stack, titles: ["doomed", "kept"])
        let context = stack.newContext()
        let other = stack.newContext()
        try context.performAndWait {
            let objects = try context.fetch(sortedRequest())
            try other.performAndWait {
                other.delete(try other.existingObject(with: ids[0]))
                try other.save()
            }
            let doomed = objects[0]
            #expect(doomed.isFault)
            #expect(doomed.title == nil, "no stale values")
            #expect(try doomed.value(forKey: "title") == nil)
            #expect(doomed.isDeleted)
            #expect(!doomed.isFault)
            #expect(context.deletedObjects == [doomed])
            #expect(throws: ObjectGraphError.objectNotFound(ids[0])) { try context.existingObject(with: ids[0]) }
            #expect(objects[1].title == "kept")

            try context.save()   // the vanished object needs no validation and no write
            #expect(!context.hasChanges)
            #expect(context.registeredObject(for: ids[0]) == nil)
        }
    }

    @Test func aFaultWhoseRowAnotherCoordinatorDeletedBecomesADeletedObject() throws {
        let stack = try TestStack(type: .sqlite)
        let ids = try stack.seedCompanies(["DOOMED"])
        let context = stack.newContext()
        let doomed = context.performAndWait { context.object(with: ids[0]) as? Company }
        let other = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: try stack.secondCoordinator())
        try other.performAndWait {
            other.delete(try other.existingObject(with: ids[0]))
            try other.save()
        }
        try context.performAndWait {
            let company = try #require(doomed)
            #expect(company.isFault)
            #expect(company.employees == 0)
            #expect(company.name == nil)
            #expect(company.isDeleted)
            try context.save()
        }
    }

    @Test func aFetchedFaultWithNoStalenessAllowedSeesARowDeletedByAnotherCoordinator() throws {
        let stack = try TestStack(type: .sqlite)
        let ids = try stack.seedCompanies(["DOOMED", "KEPT"])
        let context = stack.newContext()
        context.stalenessInterval = 0
        let faults = try context.performAndWait {
            var request = FetchRequest<Company>()
            request.sortDescriptors = [FetchSort(key: "symbol")]
            return try context.fetch(request)
        }
        let other = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: try stack.secondCoordinator())
        try other.performAndWait {
            other.delete(try other.existingObject(with: ids[0]))
            try other.save()
        }
        context.performAndWait {
            #expect(faults[0].isFault)
            #expect(faults[0].symbol == "")
            #expect(faults[0].isDeleted)
            #expect(faults[1].symbol == "KEPT")
            #expect(!faults[1].isDeleted)
        }
    }

    @Test(arguments: allStoreTypes)
    func aToManyRelationshipLoadsOnFirstAccess(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let context = stack.newContext()
        let id = try context.performAndWait {
            let company = Company(context: context)
            company.symbol = "A"
            for price in [1.0, 2.0, 3.0] {
                let update = StockUpdate(context: context)
                update.price = price
                update.company = company
            }
            try context.save()
            return company.objectID
        }
        let reader = stack.newContext()
        try reader.performAndWait {
            let company = try #require(reader.object(with: id) as? Company)
            let updates = company.updates
            #expect(updates.map(\.price).sorted() == [1, 2, 3])
            #expect(updates.allSatisfy { $0.company === company })
        }
    }
}

/// `includesPropertyValues = false`: a fetch that reads identities only.
@Suite struct PropertyValuesFetchTests {
    private func listRequest() throws -> FetchRequest<Listing> {
        var request = FetchRequest<Listing>(entityName: "Listing", predicate: try FetchPredicate(format: "price >= 3"))
        request.sortDescriptors = [FetchSort(key: "price", ascending: false)]
        request.fetchLimit = 4
        return request
    }

    @Test(arguments: allStoreTypes)
    func withoutPropertyValuesAFetchReadsIDsOnlyAndEachFaultFiresOnUse(type: StoreType) throws {
        let graph = try GraphStack(type)
        _ = try graph.saveListings((0..<10).map { ("S\($0)", Double($0)) })
        // A coordinator that has not read these rows yet (the save may have left them cached).
        graph.coordinator.allObjectsMayHaveChanged()
        let context = graph.context()
        var request = try listRequest()
        request.includesPropertyValues = false
        request.returnsObjectsAsFaults = false   // ignored without property values, as in Core Data
        let cached = graph.coordinator.rowCacheStatistics.rows
        let (objects, statements) = try graph.countingStatements { try context.performAndWait { try context.fetch(request) } }
        #expect(context.performAndWait { objects.allSatisfy(\.isFault) })
        #expect(graph.coordinator.rowCacheStatistics.rows == cached, "no row was read, so none was cached")
        if type == .sqlite {
            #expect(statements.count == 1)
            #expect(statements.first?.hasPrefix("SELECT t0.Z_PK, t0.Z_ENT FROM") == true, "\(statements)")
        }
        let (prices, fired) = graph.countingStatements { context.performAndWait { objects.map(\.price) } }
        #expect(prices == [9, 8, 7, 6])
        if type == .sqlite { #expect(fired.count == 4, "one query per fault fired: \(fired)") }
        // The same objects, in the same order, as a fetch that reads the rows.
        let plain = graph.context()
        #expect(try plain.performAndWait { try plain.fetch(try listRequest()).map(\.objectID) } == objects.map(\.objectID))
    }

    @Test func withPropertyValuesTheRowsAreCachedAndFaultsFireWithoutAQuery() throws {
        let graph = try GraphStack(.sqlite)
        _ = try graph.saveListings((0..<10).map { ("S\($0)", Double($0)) })
        graph.coordinator.allObjectsMayHaveChanged()
        let context = graph.context()
        let objects = try context.performAndWait { try context.fetch(try listRequest()) }
        #expect(graph.coordinator.rowCacheStatistics.rows == 4)
        let (prices, fired) = graph.countingStatements { context.performAndWait { objects.map(\.price) } }
        #expect(prices == [9, 8, 7, 6])
        #expect(fired.isEmpty, "\(fired)")
    }
}

/// Counting with pending changes registers no object per stored row.
@Suite struct PendingCountTests {
    @Test(arguments: allStoreTypes)
    func aCountWithPendingChangesAsksTheStoreAndRegistersNothingMore(type: StoreType) throws {
        let graph = try GraphStack(type)
        let stored = try graph.saveListings((0..<300).map { ("S\($0)", Double($0)) })
        let context = graph.context()
        let request = FetchRequest<Listing>(entityName: "Listing", predicate: try FetchPredicate(format: "price >= 100"))
        let (count, expected, registered, statements) = try context.performAndWait {
            for index in 0..<20 {
                let listing = Listing(context: context)
                listing.symbol = "N\(index)"
                listing.price = index.isMultiple(of: 2) ? 500 : 1   // 10 match
            }
            for id in stored[95..<105] {   // 95...99 come to match, 100...104 stop
                let listing = try #require(try context.existingObject(with: id) as? Listing)
                listing.price = listing.price < 100 ? 1_000 : 0
            }
            for id in stored[200..<205] { context.delete(try context.existingObject(with: id)) }   // 5 matching gone
            let (count, statements) = try graph.countingStatements { try context.count(for: request) }
            let registered = context.registeredObjectCount
            // The count a fetch of the objects gives (which registers them).
            let expected = try context.fetch(request).count
            return (count, expected, registered, statements)
        }
        #expect(count == 200 + 10 + 5 - 5 - 5)
        #expect(count == expected)
        #expect(registered == 35, "only the 20 inserted, 10 updated and 5 deleted objects")
        if type == .sqlite { #expect(statements.count == 2, "the count and the changed rows' count: \(statements)") }
        var limited = request
        limited.fetchLimit = 7
        limited.fetchOffset = 203
        #expect(try context.performAndWait { try context.count(for: limited) } == 2)
    }
}

/// A sorted, limited fetch with pending changes asks the store for its best rows only.
@Suite struct PendingLimitedFetchTests {
    @Test(arguments: allStoreTypes)
    func aSortedLimitedFetchWithPendingChangesReadsTheStoresBestRowsInOneQuery(type: StoreType) throws {
        let graph = try GraphStack(type)
        let stored = try graph.saveListings((0..<500).map { ("S\($0)", Double($0)) })
        graph.coordinator.allObjectsMayHaveChanged()
        let context = graph.context()
        var request = FetchRequest<Listing>(entityName: "Listing", predicate: try FetchPredicate(format: "price >= 10"))
        request.sortDescriptors = [FetchSort(key: "price", ascending: false), FetchSort(key: "symbol")]
        request.fetchLimit = 5
        request.fetchOffset = 2
        let (symbols, expected, statements) = try context.performAndWait {
            for index in 0..<30 {
                let listing = Listing(context: context)
                listing.symbol = "N\(index)"
                listing.price = index < 3 ? 497.5 : 5   // three land among the best
            }
            for id in stored[498...] {   // the two best stored rows drop out
                let listing = try #require(try context.existingObject(with: id) as? Listing)
                listing.price = 0
            }
            let updated = try #require(try context.existingObject(with: stored[7]) as? Listing)
            updated.price = 600   // comes to the top
            context.delete(try context.existingObject(with: stored[497]))
            let (objects, statements) = try graph.countingStatements { try context.fetch(request) }
            var everything = request
            everything.fetchLimit = 0
            everything.fetchOffset = 0
            let expected = Array(try context.fetch(everything).dropFirst(2).prefix(5)).map(\.symbol)
            return (objects.map(\.symbol), expected, statements)
        }
        #expect(symbols == expected)
        #expect(symbols == ["N1", "N2", "S496", "S495", "S494"], "S7 (600) and N0 are the offset")
        if type == .sqlite {
            #expect(statements.count == 1, "\(statements)")
            // limit 5 + offset 2 + the 4 changed stored objects, whose rows are dropped in memory.
            #expect(statements.first?.contains("LIMIT 11") == true, "\(statements)")
        }
    }
}

extension PendingLimitedFetchTests {
    /// Unsorted, a limited fetch with pending changes asks for the store's
    /// first rows only, not for every matching ID: the same objects, in the
    /// same order, as the unlimited fetch cut to the limit.
    @Test(arguments: allStoreTypes)
    func anUnsortedLimitedFetchWithPendingChangesReadsTheStoresFirstRowsInOneQuery(type: StoreType) throws {
        let graph = try GraphStack(type)
        let stored = try graph.saveListings((0..<500).map { ("S\($0)", Double($0)) })
        let context = graph.context()
        var request = FetchRequest<Listing>(entityName: "Listing", predicate: try FetchPredicate(format: "price >= 0"))
        request.fetchLimit = 6
        let (symbols, expected, statements, registered) = try context.performAndWait {
            for index in 0..<30 { Listing(context: context).symbol = "N\(index)" }
            for id in stored[0..<2] { (try #require(try context.existingObject(with: id) as? Listing)).price = 1_000 }
            context.delete(try context.existingObject(with: stored[2]))
            let before = context.registeredObjects.count
            let (objects, statements) = try graph.countingStatements { try context.fetch(request) }
            let registered = context.registeredObjects.count - before
            var everything = request
            everything.fetchLimit = 0
            let expected = Array(try context.fetch(everything).prefix(6)).map(\.symbol)
            return (objects.map(\.symbol), expected, statements, registered)
        }
        #expect(symbols == expected)
        #expect(symbols.count == 6)
        if type == .sqlite {
            #expect(Set(symbols).isDisjoint(with: ["S0", "S1", "S2"]), "the changed stored objects are not among the store's rows")
            #expect(statements.count == 1, "\(statements)")
            #expect(statements.first?.contains("LIMIT 9") == true, "limit 6 + the 3 changed stored objects: \(statements)")
            #expect(registered <= 9, "an object for each row read, not for each match (\(registered))")
        }
    }
}

/// The partial selection that a limited fetch with many pending changes uses:
/// the same objects, in the same order, as sorting everything and cutting.
@Suite struct FetchSortFirstTests {
    @Test(arguments: [0, 1, 3, 7, 24, 25, 99, 100, 250])
    func theFirstCountAreTheSortedPrefixTiesInTheirGivenOrder(count: Int) throws {
        let graph = try GraphStack(.inMemory)
        let context = graph.context()
        try context.performAndWait {
            var generator = SystemRandomNumberGenerator()
            let listings = (0..<100).map { index in
                let listing = Listing(context: context)
                listing.symbol = "S\(index % 7)"          // many ties on the second key
                listing.price = Double(Int.random(in: 0..<10, using: &generator))   // and on the first
                listing.name = index % 5 == 0 ? nil : "n\(index)"
                return listing
            }
            let sorts = [FetchSort(key: "price", ascending: false), FetchSort(key: "symbol"), FetchSort(key: "name")]
            let expected = Array(try FetchSort.sort(listings, by: sorts, from: listings[0].entity).prefix(count))
            let first = try FetchSort.first(count, of: listings, by: sorts, from: listings[0].entity)
            #expect(first.map(ObjectIdentifier.init) == expected.map(ObjectIdentifier.init))
        }
    }
}
