import Foundation
@testable import ObjectGraph
import Testing
@testable import DataStackStores

/// Batch updates on both stores: constants and arithmetic, results, versions,
/// uniqueness, cached rows and merging into contexts.
@Suite struct BatchUpdateTests {
    @Test(arguments: allStoreTypes)
    func aConstantChangesTheMatchingRowsOnlyAndBumpsTheirVersions(type: StoreType) throws {
        let graph = try GraphStack(type)
        let ids = try graph.saveListings([("A", 10), ("B", 200), ("C", 300)])
        let context = graph.context()
        var request = BatchUpdateRequest(entityName: "Listing", predicate: try FetchPredicate(format: "price > 100"),
                                         propertiesToUpdate: ["name": "expensive", "price": 99.5])
        request.resultType = .objectIDs
        let result = try context.performAndWait { try context.execute(request) }
        #expect(result == .objectIDs(ContextDidSave(updatedObjectIDs: [ids[1], ids[2]])))
        #expect(try graph.prices() == ["A": 10, "B": 99.5, "C": 99.5])
        #expect(try ids.map(graph.version(of:)) == [1, 2, 2])
    }

    @Test(arguments: allStoreTypes)
    func eachResultTypeAnswersAsAsked(type: StoreType) throws {
        let graph = try GraphStack(type)
        _ = try graph.saveListings([("A", 1), ("B", 2)])
        let context = graph.context()
        var request = BatchUpdateRequest(entityName: "Listing", propertiesToUpdate: ["price": 5])
        #expect(try context.performAndWait { try context.execute(request) } == .statusOnly)
        request.resultType = .count
        #expect(try context.performAndWait { try context.execute(request) } == .count(2))
        request.predicate = try FetchPredicate(format: "symbol == 'none'")
        #expect(try context.performAndWait { try context.execute(request) } == .count(0))
    }

    @Test(arguments: allStoreTypes)
    func arithmeticReadsTheRowsOwnValuesAsSQLWould(type: StoreType) throws {
        let graph = try GraphStack(type)
        _ = try graph.saveListings([("A", 10), ("B", 20)])
        let context = graph.context()
        try context.performAndWait {
            for (row, number) in [("a", 7), ("b", -7), ("c", 1)] {
                let seat = Seat(context: context)
                seat.row = row
                seat.number = number
            }
            try context.save()
            try context.execute(BatchUpdateRequest(entityName: "Listing",
                                                   propertiesToUpdate: ["price": .keyPath("price") * 1.5 + 1, "name": .keyPath("symbol")]))
            // `/` divides as floating point, as FetchExpression does in a fetch; the result is truncated into the integer attribute.
            try context.execute(BatchUpdateRequest(entityName: "Seat", propertiesToUpdate: ["number": .keyPath("number") / 2 * 10 + 2.9]))
            // Integers stay integers; nil in arithmetic gives nil.
            try context.execute(BatchUpdateRequest(entityName: "Seat", predicate: try FetchPredicate(format: "row == 'b'"),
                                                   propertiesToUpdate: ["number": .keyPath("number") * 3 - 1, "holder": "them"]))
            try context.execute(BatchUpdateRequest(entityName: "Seat", predicate: try FetchPredicate(format: "row == 'c'"),
                                                   propertiesToUpdate: ["number": .keyPath("number") + nil]))
            try context.execute(BatchUpdateRequest(entityName: "Listing", predicate: try FetchPredicate(format: "symbol == 'B'"),
                                                   propertiesToUpdate: ["name": nil]))
        }
        #expect(try graph.prices() == ["A": 16, "B": 31])
        let check = graph.context()
        let (seats, names) = try check.performAndWait {
            let seats = try check.fetch(FetchRequest<Seat>(entityName: "Seat", predicate: nil, sortDescriptors: [FetchSort(key: "row")]))
            let listings = try check.fetch(FetchRequest<Listing>(entityName: "Listing", predicate: nil, sortDescriptors: [FetchSort(key: "symbol")]))
            return (try seats.map { "\(try $0.value(forKey: "number") ?? "nil") \($0.holder ?? "-")" }, listings.map { $0.name ?? "-" })
        }
        #expect(seats == ["37 -", "-97 them", "nil -"])
        #expect(names == ["A", "-"])
    }

    @Test(arguments: allStoreTypes)
    func aContextHoldingAnOlderVersionConflictsOnSave(type: StoreType) throws {
        let graph = try GraphStack(type)
        let ids = try graph.saveListings([("A", 10)])
        let holder = graph.context()
        let listing = try holder.performAndWait { try #require(holder.existingObject(with: ids[0]) as? Listing) }
        let batch = graph.context()
        try batch.performAndWait { _ = try batch.execute(BatchUpdateRequest(entityName: "Listing", propertiesToUpdate: ["price": 11])) }
        holder.performAndWait {
            listing.name = "stale"
            #expect { try holder.save() } throws: { error in
                guard let error = error as? ObjectGraphError, error.code == .mergeConflict else { return false }
                return error.mergeConflicts.map(\.persistedSnapshotVersion) == [2]
            }
        }
    }

    @Test(arguments: allStoreTypes)
    func aDuplicateUniqueKeyFailsNamingItAndChangesNothing(type: StoreType) throws {
        let graph = try GraphStack(type)
        _ = try graph.saveListings([("A", 10), ("B", 20)])
        let before = try graph.rows()
        let context = graph.context()
        #expect { try context.performAndWait { try context.execute(BatchUpdateRequest(entityName: "Listing", propertiesToUpdate: ["symbol": "SAME"])) } }
            throws: { error in
                guard let error = error as? ObjectGraphError, error.code == .uniquenessConflict else { return false }
                let conflicts = error.uniquenessConflicts
                return conflicts.first?.constraint == ["symbol"] && conflicts.first?.entityName == "Listing"
            }
        #expect(try graph.rows() == before)
        // One row taking a free key is fine.
        try context.performAndWait {
            _ = try context.execute(BatchUpdateRequest(entityName: "Listing", predicate: try FetchPredicate(format: "symbol == 'A'"),
                                                   propertiesToUpdate: ["symbol": "Z"]))
        }
        #expect(try graph.prices() == ["Z": 10, "B": 20])
    }

    @Test(arguments: allStoreTypes)
    func subentitiesChangeWithTheirParentUnlessExcluded(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        try context.performAndWait {
            let car = Car(context: context)
            car.plate = "CAR"
            let truck = Truck(context: context)
            truck.plate = "TRUCK"
            try context.save()
            var request = BatchUpdateRequest(entityName: "Truck", propertiesToUpdate: ["load": .keyPath("load") + 3])
            request.resultType = .count
            #expect(try context.execute(request) == .count(1))
            var vehicles = BatchUpdateRequest(entityName: "Vehicle", propertiesToUpdate: ["plate": nil])
            vehicles.resultType = .count
            #expect(try context.execute(vehicles) == .count(2))
            context.reset()
            let trucks = try context.fetch(FetchRequest<Truck>(entityName: "Truck"))
            #expect(trucks.map(\.load) == [3])
        }
    }

    @Test(arguments: allStoreTypes)
    func mergingTheResultRefreshesRegisteredObjects(type: StoreType) throws {
        let graph = try GraphStack(type)
        let ids = try graph.saveListings([("A", 10), ("B", 20)])
        let viewer = graph.context()
        let listings = try viewer.performAndWait { try ids.map { try #require(viewer.existingObject(with: $0) as? Listing) } }
        #expect(viewer.performAndWait { listings.map(\.price) } == [10, 20])
        let batch = graph.context()
        var request = BatchUpdateRequest(entityName: "Listing", propertiesToUpdate: ["price": .keyPath("price") * 2])
        request.resultType = .objectIDs
        let result = try batch.performAndWait { try batch.execute(request) }
        // Not merged: the context keeps what it read, as in Core Data.
        #expect(viewer.performAndWait { listings.map(\.price) } == [10, 20])
        guard case .objectIDs(let changes) = result else { Issue.record("no IDs: \(result)"); return }
        ManagedObjectContext.mergeChanges(fromRemoteContextSave: changes, into: [viewer])
        #expect(viewer.performAndWait { listings.map(\.price) } == [20, 40])
    }

    @Test(arguments: allStoreTypes)
    func theExecutingContextPostsTheChangesAsASave(type: StoreType) throws {
        let graph = try GraphStack(type)
        let ids = try graph.saveListings([("A", 10)])
        let context = graph.context()
        let saves = SaveLog()
        let token = NotificationCenter.default.addObserver(forName: ManagedObjectContext.didSaveNotification, object: context, queue: nil) {
            if let save = try? ContextDidSave($0) { saves.append(save) }
        }
        defer { NotificationCenter.default.removeObserver(token) }
        try context.performAndWait { _ = try context.execute(BatchUpdateRequest(entityName: "Listing", propertiesToUpdate: ["price": 1])) }
        #expect(saves.all.map(\.updatedObjectIDs) == [[ids[0]]])
    }
}

/// Saves seen by an observer, from whichever thread posts them.
final class SaveLog: @unchecked Sendable {
    private let lock = NSLock()
    private var saves: [ContextDidSave] = []
    func append(_ save: ContextDidSave) { lock.withLock { saves.append(save) } }
    var all: [ContextDidSave] { lock.withLock { saves } }

    @Test(arguments: allStoreTypes)
    func aPredicateThroughAToOneSelectsByTheRelatedRow(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        let (inRock, inJazz) = try context.performAndWait {
            func playlist(_ name: String) -> Track {
                let list = Playlist(context: context)
                list.name = name
                let track = Track(context: context)
                track.title = "untitled"
                track.playlist = list
                return track
            }
            let rock = playlist("rock"), jazz = playlist("jazz")
            try context.save()
            return (rock.objectID, jazz.objectID)
        }
        var request = BatchUpdateRequest(entityName: "Track", predicate: try FetchPredicate(format: "playlist.name == %@", "rock"),
                                         propertiesToUpdate: ["title": "Rock 1"])
        request.resultType = .objectIDs
        #expect(try context.performAndWait { try context.execute(request) } == .objectIDs(ContextDidSave(updatedObjectIDs: [inRock])))
        let reader = graph.context()
        let titles = try reader.performAndWait {
            try [inRock, inJazz].map { try #require(reader.existingObject(with: $0) as? Track).title }
        }
        #expect(titles == ["Rock 1", "untitled"])
        #expect(try [inRock, inJazz].map { try graph.version(of: $0) } == [2, 1])
    }

    /// SQLite checks a unique index row by row as it writes, so moving unique
    /// values past each other fails at the first row (in its scan order) that
    /// takes a value another still holds, as Core Data's batch update does on SQLite; the
    /// in-memory store checks the result as a whole (documented on
    /// ``BatchUpdateRequest``).
    @Test(arguments: allStoreTypes)
    func shiftingUniqueValuesPastEachOtherFailsInSQLiteOnly(type: StoreType) throws {
        let graph = try GraphStack(type)
        let context = graph.context()
        try context.performAndWait {
            // One save per seat, so the keys (SQLite's scan order) follow the numbers:
            // in the reverse order every row would move to a value already left.
            for number in 1...3 {
                let seat = Seat(context: context)
                seat.row = "A"
                seat.number = number
                try context.save()
            }
        }
        let before = try graph.rows()
        let shift = BatchUpdateRequest(entityName: "Seat", propertiesToUpdate: ["number": .keyPath("number") + 1])
        let outcome = context.performAndWait { () -> (any Error)? in
            do { _ = try context.execute(shift) } catch { return error }
            return nil
        }
        // A fresh context: the one that saved the seats still holds them as they were.
        let reader = graph.context()
        let numbers = try reader.performAndWait {
            try reader.fetch(FetchRequest<Seat>(entityName: "Seat")).map(\.number).sorted()
        }
        switch type {
        case .sqlite:
            guard let conflict = outcome as? ObjectGraphError, conflict.code == .uniquenessConflict else {
                Issue.record("expected a uniqueness conflict, got \(String(describing: outcome))")
                return
            }
            #expect(conflict.uniquenessConflicts.first?.constraint == ["row", "number"])
            #expect(try graph.rows() == before)
            #expect(numbers == [1, 2, 3])
        default:
            #expect(outcome == nil)
            #expect(numbers == [2, 3, 4])
        }
    }

    /// A batch reads its rows' IDs on the reader connection while the writer
    /// writes them. In a rollback-journal store that reader's shared lock
    /// keeps the writer from spilling its page cache into the file (SQLite
    /// then keeps the pages in memory) and is released before the commit: a
    /// busy mode that never waits and an update bigger than the cache must
    /// not fail on the batch's own reading, in either journal mode.
    @Test(arguments: [StoreOptions.JournalMode.delete, .wal])
    func aLargeBatchSucceedsInEitherJournalModeWithoutWaiting(mode: StoreOptions.JournalMode) throws {
        let directory = TemporaryDirectory()
        var options = StoreOptions()
        options.journalMode = mode
        options.busyMode = .immediateError
        let coordinator = PersistentStoreCoordinator(managedObjectModel: GraphTestModel.make())
        try coordinator.addPersistentStore(type: .sqlite, at: directory.file("Journal.sqlite"), options: options)
        let context = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        let count = 40_000
        try context.performAndWait {
            _ = try context.execute(BatchInsertRequest(entityName: "Listing") { index, row in
                guard index < count else { return true }
                row["symbol"] = "S\(index)"
                row["name"] = String(repeating: "n", count: 60)
                row["price"] = Double(index)
                return false
            })
            var update = BatchUpdateRequest(entityName: "Listing", propertiesToUpdate: ["price": .keyPath("price") * 2, "name": "renamed"])
            update.resultType = .count
            #expect(try context.execute(update) == .count(count))
            var delete = BatchDeleteRequest(fetchRequest: FetchRequest<ManagedObject>(entityName: "Listing",
                                                                                     predicate: try FetchPredicate(format: "price >= %@", Double(count))))
            delete.resultType = .count
            #expect(try context.execute(delete) == .count(count / 2))
        }
        let raw = try SQLiteReference(directory.file("Journal.sqlite"))
        #expect(try raw.rows("SELECT COUNT(*), SUM(ZPRICE), MIN(Z_OPT), MAX(Z_OPT) FROM ZLISTING") == [
            ["\(count / 2)", "\(Double((0..<count / 2).reduce(0, +) * 2))", "2", "2"],
        ])
    }
}
