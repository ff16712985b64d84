import Foundation
import ObjectGraph
import Testing
import DataStackStores

/// Uniqueness constraints, checked at save against the context and the store:
/// `.error` throws naming the objects and the keys; the trump policies collapse
/// duplicates into one object.
@Suite struct UniquenessConstraintTests {
    /// A stored listing ACME ("Acme Corp", 10) with two quotes.
    private func seedAcme(_ graph: GraphStack) throws -> ObjectID {
        let context = graph.context()
        return try context.performAndWait {
            let listing = Listing(context: context)
            listing.symbol = "ACME"
            listing.name = "Acme Corp"
            listing.price = 10
            for value in [1.0, 2.0] {
                let quote = Quote(context: context)
                quote.value = value
                quote.listing = listing
            }
            try context.save()
            return listing.objectID
        }
    }

    private func listings(_ graph: GraphStack) throws -> [String] {
        let context = graph.context()
        return try context.performAndWait {
            var request = FetchRequest<Listing>()
            request.sortDescriptors = [FetchSort(key: "symbol")]
            return try context.fetch(request).map { listing in
                "\(listing.symbol):\(listing.name ?? "-"):\(listing.price):\(listing.quotes.map(\.value).sorted())"
            }
        }
    }

    @Test(arguments: allStoreTypes)
    func theErrorPolicyThrowsNamingTheObjectsAndTheKeys(type: StoreType) throws {
        let graph = try GraphStack(type)
        let acme = try seedAcme(graph)
        let context = graph.context()
        try context.performAndWait {
            let duplicate = Listing(context: context)
            duplicate.symbol = "ACME"
            let error = #expect(throws: ObjectGraphError.self) { try context.save() }
            guard error?.code == .uniquenessConflict, let conflicts = error?.uniquenessConflicts else {
                Issue.record("expected a uniqueness conflict, got \(String(describing: error))")
                return
            }
            #expect(conflicts == [UniquenessConflict(entityName: "Listing", constraint: ["symbol"],
                                                     objectIDs: [duplicate.objectID], databaseObjectID: acme)])
            #expect(error?.description.contains("Listing (symbol)") == true)
            #expect(duplicate.isInserted && context.hasChanges, "a failed save keeps the changes")

            // Two new objects with the same values conflict with each other.
            duplicate.symbol = "NEW"
            let twin = Listing(context: context)
            twin.symbol = "NEW"
            let second = #expect(throws: ObjectGraphError.self) { try context.save() }
            guard second?.code == .uniquenessConflict, let pair = second?.uniquenessConflicts else {
                Issue.record("expected a uniqueness conflict, got \(String(describing: second))")
                return
            }
            #expect(pair.count == 1)
            #expect(Set(pair.first?.objectIDs ?? []) == [duplicate.objectID, twin.objectID])
            #expect(pair.first?.databaseObjectID == nil)
            twin.symbol = "OTHER"
            try context.save()
        }
        #expect(try listings(graph).map { $0.split(separator: ":")[0] } == ["ACME", "NEW", "OTHER"])
    }

    @Test(arguments: allStoreTypes)
    func objectTrumpLetsTheNewValuesWinAndTakesOverTheStoredRow(type: StoreType) throws {
        let graph = try GraphStack(type)
        let acme = try seedAcme(graph)
        let context = graph.context(.mergeByPropertyObjectTrump)
        try context.performAndWait {
            let update = Listing(context: context)
            update.symbol = "ACME"
            update.price = 12
            let quote = Quote(context: context)
            quote.value = 3
            quote.listing = update
            try context.save()
            #expect(update.objectID == acme, "the inserted object became the stored row")
            #expect(!update.isInserted && !update.hasChanges)
            #expect(update.name == "Acme Corp", "a value the new object did not set keeps the store's")
            #expect(update.price == 12)
            #expect(quote.listing === update)
            #expect(update.quotes.count == 3, "the row's quotes and the new one")
        }
        #expect(try listings(graph) == ["ACME:Acme Corp:12.0:[1.0, 2.0, 3.0]"])
    }

    @Test(arguments: allStoreTypes)
    func storeTrumpKeepsTheStoredValuesAndFillsItsGaps(type: StoreType) throws {
        let graph = try GraphStack(type)
        let acme = try seedAcme(graph)
        let context = graph.context(.mergeByPropertyStoreTrump)
        try context.performAndWait {
            let stored = try #require(context.existingObject(with: acme) as? Listing)
            stored.name = nil
            try context.save()
            context.reset()

            let update = Listing(context: context)
            update.symbol = "ACME"
            update.price = 99
            update.name = "Acme Inc"
            let quote = Quote(context: context)
            quote.value = 3
            quote.listing = update
            try context.save()
            #expect(update.objectID == acme)
            #expect(update.price == 10, "the store's value wins")
            #expect(update.name == "Acme Inc", "the store had none")
        }
        #expect(try listings(graph) == ["ACME:Acme Inc:10.0:[1.0, 2.0, 3.0]"])
    }

    @Test(arguments: [MergePolicy.mergeByPropertyObjectTrump, .mergeByPropertyStoreTrump, .overwrite, .rollback])
    func duplicatesInsertedTogetherCollapseIntoOne(policy: MergePolicy) throws {
        for type in allStoreTypes {
            let graph = try GraphStack(type)
            let context = graph.context(policy)
            try context.performAndWait {
                let first = Listing(context: context)
                first.symbol = "DUP"
                first.price = 1
                let second = Listing(context: context)
                second.symbol = "DUP"
                second.price = 2
                second.name = "second"
                let quote = Quote(context: context)
                quote.value = 5
                quote.listing = second
                try context.save()
                #expect(first.managedObjectContext === context, "the oldest survives")
                #expect(second.managedObjectContext == nil, "the other leaves the context unsaved")
                #expect(quote.listing === first, "what pointed at the duplicate points at the survivor")
            }
            let objectWins = policy == .mergeByPropertyObjectTrump || policy == .overwrite
            #expect(try listings(graph) == [objectWins ? "DUP:second:2.0:[5.0]" : "DUP:second:1.0:[5.0]"], "\(policy) \(type)")
        }
    }

    @Test(arguments: allStoreTypes)
    func aRegisteredStoredObjectSurvivesAndTheDuplicateLeaves(type: StoreType) throws {
        let graph = try GraphStack(type)
        let acme = try seedAcme(graph)
        let context = graph.context(.mergeByPropertyObjectTrump)
        try context.performAndWait {
            let stored = try #require(context.existingObject(with: acme) as? Listing)
            let duplicate = Listing(context: context)
            duplicate.symbol = "ACME"
            duplicate.price = 11
            try context.save()
            #expect(stored.price == 11)
            #expect(duplicate.managedObjectContext == nil)
            #expect(stored.quotes.count == 2)
        }
        #expect(try listings(graph) == ["ACME:Acme Corp:11.0:[1.0, 2.0]"])
    }

    @Test(arguments: allStoreTypes)
    func anEditThatCollidesWithAnotherRowFollowsThePolicy(type: StoreType) throws {
        for policy in [MergePolicy.mergeByPropertyObjectTrump, .mergeByPropertyStoreTrump] {
            let graph = try GraphStack(type)
            _ = try seedAcme(graph)
            let seed = graph.context()
            let betaID = try seed.performAndWait {
                let beta = Listing(context: seed)
                beta.symbol = "BETA"
                beta.price = 5
                try seed.save()
                return beta.objectID
            }
            let context = graph.context(policy)
            try context.performAndWait {
                let beta = try #require(context.existingObject(with: betaID) as? Listing)
                beta.symbol = "ACME"
                try context.save()
            }
            if policy == .mergeByPropertyObjectTrump {
                // The edited object wins; the other row joins it and goes.
                #expect(try listings(graph) == ["ACME:Acme Corp:5.0:[1.0, 2.0]"])
            } else {
                // The store wins: the edit of the constrained value is undone.
                #expect(try listings(graph) == ["ACME:Acme Corp:10.0:[1.0, 2.0]", "BETA:-:5.0:[]"])
            }
        }
    }

    @Test(arguments: allStoreTypes)
    func aConstraintOverSeveralKeysAndOneInheritedBySubentities(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        try context.performAndWait {
            for (row, number) in [("A", 1), ("A", 2), ("B", 1)] {
                let seat = Seat(context: context)
                seat.row = row
                seat.number = number
            }
            let car = Car(context: context)
            car.plate = "P1"
            try context.save()

            let seat = Seat(context: context)
            seat.row = "A"
            seat.number = 2
            let truck = Truck(context: context)
            truck.plate = "P1"
            let error = #expect(throws: ObjectGraphError.self) { try context.save() }
            guard error?.code == .uniquenessConflict, let conflicts = error?.uniquenessConflicts else {
                Issue.record("expected a uniqueness conflict, got \(String(describing: error))")
                return
            }
            #expect(conflicts.map(\.entityName) == ["Seat", "Vehicle"])
            #expect(conflicts.map(\.constraint) == [["row", "number"], ["plate"]])
            #expect(conflicts.last?.databaseObjectID == car.objectID)
            seat.number = 3
            truck.plate = "P2"
            try context.save()
        }
    }

    @Test(arguments: allStoreTypes)
    func aSubentityDuplicateMergesIntoTheStoredObjectOfTheOtherSubentity(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context(.mergeByPropertyObjectTrump)
        try context.performAndWait {
            let car = Car(context: context)
            car.plate = "P1"
            try context.save()
            context.reset()
            let garage = Garage(context: context)
            garage.name = "g"
            let truck = Truck(context: context)
            truck.plate = "P1"
            truck.load = 3
            truck.garage = garage
            try context.save()
            #expect(truck.managedObjectContext == nil)
            let vehicles = garage.vehicles
            #expect(vehicles.count == 1 && vehicles.first is Car, "the stored car keeps its row and entity")
        }
    }

    @Test(arguments: allStoreTypes)
    func aDuplicateSavedThroughAChildFollowsTheSurvivor(type: StoreType) throws {
        let graph = try GraphStack(type)
        let acme = try seedAcme(graph)
        let parent = graph.context(.mergeByPropertyObjectTrump)
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        let listing = try child.performAndWait {
            let listing = Listing(context: child)
            listing.symbol = "ACME"
            listing.price = 20
            try child.save()
            return listing
        }
        try parent.performAndWait { try parent.save() }
        try child.performAndWait {
            listing.price = 21
            try child.save()
        }
        try parent.performAndWait {
            // The child's object (known by its temporary ID) reaches the survivor.
            #expect(try #require(parent.existingObject(with: acme) as? Listing).price == 21)
            try parent.save()
        }
        let rows = try listings(graph)
        #expect(rows.count == 1 && rows.first?.hasPrefix("ACME:") == true && rows.first?.contains(":21.0:") == true, "\(rows)")
    }

    @Test func theSQLiteStoreHasAUniqueIndexAndReportsARowItRefuses() throws {
        let graph = try GraphStack()
        let acme = try seedAcme(graph)
        #expect(try RawStore.text(graph.storeURL, "SELECT sql FROM sqlite_master WHERE name = 'Z_Listing_UNIQUE_symbol'")
                == "CREATE UNIQUE INDEX Z_Listing_UNIQUE_symbol ON ZLISTING (ZSYMBOL COLLATE BINARY ASC)")
        // A row saved past the context's check (another coordinator, say) is refused by the index.
        let store = try #require(graph.coordinator.persistentStores.first)
        let entity = try #require(graph.coordinator.managedObjectModel.entitiesByName["Listing"])
        let id = ObjectID.temporary(for: entity)
        let node = IncrementalStoreNode(objectID: id, values: [.string("ACME"), .null, .double(1), .null], version: 0)
        let error = #expect(throws: ObjectGraphError.self) {
            try store.execute(.save(SaveChangesRequest(insertedObjects: [node])), in: nil)
        }
        #expect(error == .uniquenessConflict([UniquenessConflict(entityName: "Listing", constraint: ["symbol"],
                                                                 objectIDs: [id], databaseObjectID: nil)]))
        #expect(try RawStore.int(graph.storeURL, "SELECT count(*) FROM ZLISTING") == 1)
        _ = acme
    }
}
