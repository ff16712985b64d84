@_spi(DataStackInternal) import DataStackSQLite
import DataStackStores
import Foundation
import ObjectGraph
import Testing

/// Query generations (`setQueryGenerationFrom(_:)`): a pinned context reads
/// the SQLite store as it was when it pinned, whatever is saved after, until
/// it moves on.
@Suite struct QueryGenerationTests {
    /// A store with companies A (10 employees) and B (20), and a reader context.
    private struct Setup {
        let stack: TestStack
        let reader: ManagedObjectContext
        let ids: [ObjectID]

        init() throws {
            stack = try TestStack()
            ids = try stack.seedCompanies(["A", "B"])
            reader = stack.newContext()
        }

        /// From another context of the coordinator: A gets `employees`, and
        /// companies C and D are inserted.
        @discardableResult
        func saveElsewhere(employees: Int) throws -> ContextDidSave {
            let writer = stack.newContext()
            return try writer.performAndWait {
                try #require(try writer.existingObject(with: ids[0]) as? Company).employees = employees
                for symbol in ["C", "D"] where try writer.count(for: Self.companies(symbol: symbol)) == 0 {
                    Company(context: writer).symbol = symbol
                }
                let didSave = NotificationRecorder(ManagedObjectContext.didSaveNotification, object: writer)
                try writer.save()
                return try ContextDidSave(try #require(didSave.notifications.first))
            }
        }

        static func companies(symbol: String? = nil) throws -> FetchRequest<Company> {
            var request = FetchRequest<Company>(entityName: "Company")
            if let symbol { request.predicate = try FetchPredicate(format: "symbol == %@", symbol) }
            request.sortDescriptors = [FetchSort(key: "symbol")]
            return request
        }

        /// How many companies `context` counts, and A's employees as a fault of it fires.
        func view(in context: ManagedObjectContext) throws -> (count: Int, employees: Int) {
            try Self.view(in: context, a: ids[0])
        }

        static func view(in context: ManagedObjectContext, a id: ObjectID) throws -> (count: Int, employees: Int) {
            try context.performAndWait {
                let count = try context.count(for: companies())
                let a = try #require(context.object(with: id) as? Company)
                if !a.isFault { context.refresh(a, mergeChanges: false) }
                return (count, a.employees)
            }
        }

        /// What an unpinned context of the coordinator sees.
        func latest() throws -> (count: Int, employees: Int) { try view(in: stack.newContext()) }

        /// Pins the reader and makes its first read, which fixes the generation; its token.
        @discardableResult
        func pinReader() throws -> QueryGenerationToken? {
            try reader.performAndWait {
                try reader.setQueryGenerationFrom(.current)
                _ = try reader.count(for: Self.companies())
                return reader.queryGenerationToken
            }
        }
    }

    @Test func aPinnedContextKeepsReadingItsGeneration() throws {
        let setup = try Setup()
        try setup.reader.performAndWait { try setup.reader.setQueryGenerationFrom(.current) }
        #expect(try setup.view(in: setup.reader) == (2, 10))
        try setup.saveElsewhere(employees: 11)
        #expect(try setup.view(in: setup.reader) == (2, 10))
        let fetched = try setup.reader.performAndWait { try setup.reader.fetch(Setup.companies()).map(\.symbol) }
        #expect(fetched == ["A", "B"])
        #expect(try setup.latest() == (4, 11))
    }

    @Test func withoutAGenerationAContextReadsTheLatestData() throws {
        let setup = try Setup()
        #expect(try setup.view(in: setup.reader) == (2, 10))
        try setup.saveElsewhere(employees: 11)
        #expect(try setup.view(in: setup.reader) == (4, 11))
        #expect(setup.reader.performAndWait { setup.reader.queryGenerationToken } == nil)
    }

    @Test func currentPinsAtTheFirstReadNotWhenSet() throws {
        let setup = try Setup()
        let before = try setup.reader.performAndWait {
            try setup.reader.setQueryGenerationFrom(.current)
            return setup.reader.queryGenerationToken
        }
        #expect(before == .current)
        try setup.saveElsewhere(employees: 11)
        #expect(try setup.view(in: setup.reader) == (4, 11))
        let pinned = setup.reader.performAndWait { setup.reader.queryGenerationToken }
        #expect(pinned != nil && pinned != .current)
        try setup.saveElsewhere(employees: 12)
        #expect(try setup.view(in: setup.reader) == (4, 11))
        #expect(setup.reader.performAndWait { setup.reader.queryGenerationToken } == pinned)
    }

    /// Rows of the latest data another context cached must not serve a
    /// pinned context's faults, nor rows the pinned context read serve others'.
    @Test func theSharedRowCacheServesNeitherWay() throws {
        let setup = try Setup()
        try setup.pinReader()
        try setup.saveElsewhere(employees: 11)
        // An unpinned context caches A's new row (a fetch of faults), then the pinned one fires A.
        let other = setup.stack.newContext()
        try other.performAndWait { _ = try other.fetch(Setup.companies()) }
        let (hitsBefore, pinnedEmployees) = try setup.reader.performAndWait {
            let hits = setup.stack.coordinator.rowCacheStatistics.hits
            let a = try #require(setup.reader.object(with: setup.ids[0]) as? Company)
            return (hits, a.employees)
        }
        #expect(pinnedEmployees == 10)
        #expect(setup.stack.coordinator.rowCacheStatistics.hits == hitsBefore)
        // The pinned context fetches its generation's rows as faults: a third context still reads A's new row.
        try setup.reader.performAndWait { _ = try setup.reader.fetch(Setup.companies()) }
        #expect(try setup.latest() == (4, 11))
    }

    @Test func anotherContextReadsTheSameGeneration() throws {
        let setup = try Setup()
        let token = try setup.pinReader()
        try setup.saveElsewhere(employees: 11)
        let second = setup.stack.newContext()
        try second.performAndWait { try second.setQueryGenerationFrom(token) }
        #expect(try setup.view(in: second) == (2, 10))
        #expect(second.performAndWait { second.queryGenerationToken } == token)
    }

    /// Two contexts on their own queues share the generation's one connection.
    @Test func contextsOnTwoQueuesReadOneGenerationAtOnce() throws {
        let setup = try Setup()
        let token = try setup.pinReader()
        try setup.saveElsewhere(employees: 11)
        let second = setup.stack.newContext()
        try second.performAndWait { try second.setQueryGenerationFrom(token) }
        let contexts = [setup.reader, second]
        let a = setup.ids[0]
        let views = Views()
        DispatchQueue.concurrentPerform(iterations: contexts.count) { index in
            for _ in 0..<50 {
                // A failed read is recorded as such, and fails the test below.
                let view = (try? Setup.view(in: contexts[index], a: a)).map { "\($0.count) \($0.employees)" } ?? "failed"
                views.append(view)
            }
        }
        #expect(views.all.count == 100)
        #expect(Set(views.all) == ["2 10"])
    }

    /// More generations at once than SQLite's WAL has read marks (five):
    /// each keeps its own data, and an unpinned context reads the latest.
    @Test func tenGenerationsAtOnceEachKeepTheirData() throws {
        let stack = try TestStack()
        try stack.seedCompanies(["A"])
        let all = FetchRequest<Company>(entityName: "Company")
        var pinned: [ManagedObjectContext] = []
        for index in 0..<10 {
            let context = stack.newContext()
            let count = try context.performAndWait {
                try context.setQueryGenerationFrom(.current)
                return try context.count(for: all)
            }
            #expect(count == index + 1)
            pinned.append(context)
            try stack.seedCompanies(["X\(index)"])
        }
        let counts = try pinned.map { context in try context.performAndWait { try context.count(for: all) } }
        #expect(counts == Array(1...10))
        let latest = stack.newContext()
        #expect(try latest.performAndWait { try latest.count(for: all) } == 11)
    }

    @Test func aToManyAndAPrefetchReadTheGeneration() throws {
        let setup = try Setup()
        let context = setup.stack.newContext()
        try context.performAndWait {
            let a = try #require(try context.existingObject(with: setup.ids[0]) as? Company)
            StockUpdate(context: context).company = a
            try context.save()
        }
        try setup.pinReader()
        try context.performAndWait {
            let a = try #require(try context.existingObject(with: setup.ids[0]) as? Company)
            for _ in 0..<2 { StockUpdate(context: context).company = a }
            try context.save()
        }
        let (fired, token) = try setup.reader.performAndWait {
            (try #require(setup.reader.object(with: setup.ids[0]) as? Company).updates.count, setup.reader.queryGenerationToken)
        }
        #expect(fired == 1)
        let fresh = setup.stack.newContext()
        let prefetched = try fresh.performAndWait {
            var request = try Setup.companies(symbol: "A")
            request.relationshipKeyPathsForPrefetching = ["updates"]
            try fresh.setQueryGenerationFrom(token)
            return try #require(try fresh.fetch(request).first).updates.count
        }
        #expect(prefetched == 1)
        try context.performAndWait {
            let a = try #require(try context.existingObject(with: setup.ids[0]) as? Company)
            context.refresh(a, mergeChanges: false)
            #expect(a.updates.count == 3)
        }
    }

    @Test func aChildContextReadsItsParentsGeneration() throws {
        let setup = try Setup()
        try setup.pinReader()
        try setup.saveElsewhere(employees: 11)
        let child = ManagedObjectContext(concurrencyType: .privateQueue)
        child.parent = setup.reader
        let count = try child.performAndWait { try child.count(for: Setup.companies()) }
        #expect(count == 2)
        #expect(child.performAndWait { child.queryGenerationToken } == nil)
    }

    // MARK: - Moving on

    @Test func aSaveMovesThePinnedContextOnAndSeesTheLatestRows() throws {
        let setup = try Setup()
        let b = try setup.reader.performAndWait {
            try setup.reader.setQueryGenerationFrom(.current)
            return try #require(try setup.reader.fetch(Setup.companies()).last)
        }
        try setup.saveElsewhere(employees: 11)
        try setup.reader.performAndWait {
            b.employees = 21
            try setup.reader.save()
            #expect(setup.reader.queryGenerationToken == .current)
        }
        #expect(try setup.view(in: setup.reader) == (4, 11))
        #expect(try setup.view(in: setup.stack.newContext()).employees == 11)
    }

    /// The save checks versions against the store as it is, not as the generation has it.
    @Test func aSaveOfAnObjectChangedSinceTheGenerationConflicts() throws {
        let setup = try Setup()
        let a = try setup.reader.performAndWait {
            try setup.reader.setQueryGenerationFrom(.current)
            return try #require(try setup.reader.fetch(Setup.companies()).first)
        }
        try setup.saveElsewhere(employees: 11)
        setup.reader.performAndWait {
            a.employees = 30
            let error = #expect(throws: ObjectGraphError.self) { try setup.reader.save() }
            #expect(error?.code == .mergeConflict)
        }
        #expect(try setup.latest().employees == 11)
    }

    @Test func resetAndMergingASaveMoveThePinnedContextOn() throws {
        let setup = try Setup()
        try setup.reader.performAndWait { try setup.reader.setQueryGenerationFrom(.current) }
        #expect(try setup.view(in: setup.reader) == (2, 10))
        try setup.saveElsewhere(employees: 11)
        setup.reader.performAndWait {
            setup.reader.reset()
            #expect(setup.reader.queryGenerationToken == .current)
        }
        #expect(try setup.view(in: setup.reader) == (4, 11))
        let save = try setup.saveElsewhere(employees: 12)
        setup.reader.performAndWait { _ = setup.reader.mergeChanges(fromContextDidSave: save) }
        #expect(try setup.view(in: setup.reader) == (4, 12))
    }

    @Test func nilUnpins() throws {
        let setup = try Setup()
        try setup.reader.performAndWait { try setup.reader.setQueryGenerationFrom(.current) }
        #expect(try setup.view(in: setup.reader) == (2, 10))
        try setup.saveElsewhere(employees: 11)
        try setup.reader.performAndWait { try setup.reader.setQueryGenerationFrom(nil) }
        #expect(try setup.view(in: setup.reader) == (4, 11))
        #expect(setup.reader.performAndWait { setup.reader.queryGenerationToken } == nil)
    }

    /// The generation's read transaction holds the log; letting go of it lets
    /// a checkpoint fold the whole log in.
    @Test func lettingGoOfTheGenerationEndsItsReadTransaction() throws {
        let setup = try Setup()
        #expect(try setup.view(in: setup.reader) == (2, 10))
        try setup.reader.performAndWait { try setup.reader.setQueryGenerationFrom(.current) }
        #expect(try setup.view(in: setup.reader) == (2, 10))
        try setup.saveElsewhere(employees: 11)
        let file = try Connection(path: setup.stack.storeURL.path)
        #expect(try Self.checkpointIsBusy(file))
        try setup.reader.performAndWait { try setup.reader.setQueryGenerationFrom(nil) }
        #expect(try !Self.checkpointIsBusy(file))
    }

    /// Whether a reader holds up a checkpoint: a `PASSIVE` one, which waits
    /// for nobody, copies fewer frames than the log holds.
    private static func checkpointIsBusy(_ connection: Connection) throws -> Bool {
        let statement = try connection.prepare("PRAGMA wal_checkpoint(PASSIVE)")
        #expect(try statement.step())
        return statement.int64(at: 2) < statement.int64(at: 1)
    }

    @Test func removingTheStoreEndsTheGeneration() throws {
        let setup = try Setup()
        try setup.pinReader()
        try setup.saveElsewhere(employees: 11)
        let file = try Connection(path: setup.stack.storeURL.path)
        #expect(try Self.checkpointIsBusy(file))
        let store = try #require(setup.stack.coordinator.persistentStores.first)
        try setup.stack.coordinator.remove(store)
        #expect(try !Self.checkpointIsBusy(file))
        // The context is still pinned to it: its reads throw, they do not come back empty.
        setup.reader.performAndWait {
            _ = #expect(throws: (any Error).self) { try setup.reader.count(for: Setup.companies()) }
        }
    }

    /// A generation is of one coordinator's stores: a context given another
    /// coordinator, or made a child, reads as it is unpinned.
    @Test func anotherCoordinatorOrAParentUnpinsTheContext() throws {
        let setup = try Setup()
        try setup.pinReader()
        setup.reader.persistentStoreCoordinator = try setup.stack.secondCoordinator()
        #expect(setup.reader.performAndWait { setup.reader.queryGenerationToken } == nil)
        try setup.saveElsewhere(employees: 11)
        #expect(try setup.view(in: setup.reader) == (4, 11))
        try setup.pinReader()
        setup.reader.parent = setup.stack.newContext()
        setup.reader.persistentStoreCoordinator = setup.stack.coordinator
        #expect(setup.reader.performAndWait { setup.reader.queryGenerationToken } == nil)
    }

    // MARK: - Refused

    @Test func aChildContextCannotBePinned() throws {
        let setup = try Setup()
        let child = ManagedObjectContext(concurrencyType: .privateQueue)
        child.parent = setup.reader
        child.performAndWait {
            let error = #expect(throws: ObjectGraphError.self) { try child.setQueryGenerationFrom(.current) }
            #expect(error?.code == .invalidQueryGeneration)
            #expect(error?.message.contains("child context") == true)
            #expect(child.queryGenerationToken == nil)
        }
    }

    @Test func aTokenOfAnotherCoordinatorIsRefused() throws {
        let setup = try Setup()
        let token = try setup.pinReader()
        let elsewhere = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: try setup.stack.secondCoordinator())
        elsewhere.performAndWait {
            let error = #expect(throws: ObjectGraphError.self) { try elsewhere.setQueryGenerationFrom(token) }
            #expect(error?.code == .invalidQueryGeneration)
            #expect(elsewhere.queryGenerationToken == nil)
        }
    }

    @Test func storesThatCannotKeepAGenerationAreRefused() throws {
        let memory = try TestStack(type: .inMemory).newContext()
        memory.performAndWait {
            let error = #expect(throws: ObjectGraphError.self) { try memory.setQueryGenerationFrom(.current) }
            #expect(error?.code == .unsupportedStore)
            #expect(error?.message.contains("InMemory store cannot keep one") == true)
            #expect(memory.queryGenerationToken == nil)
        }
        let directory = TemporaryDirectory()
        let coordinator = PersistentStoreCoordinator(managedObjectModel: TestModel.make())
        var options = StoreOptions()
        options.journalMode = .delete
        try coordinator.addPersistentStore(type: .sqlite, at: directory.file("Delete.sqlite"), options: options)
        let rollbackJournal = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: coordinator)
        rollbackJournal.performAndWait {
            let error = #expect(throws: ObjectGraphError.self) { try rollbackJournal.setQueryGenerationFrom(.current) }
            #expect(error?.code == .unsupportedStore)
            #expect(error?.message.contains("WAL mode") == true)
        }
    }

    /// A pinned context's save writes the latest data whatever it read: the
    /// rows it inserts are there for everyone, its own next read included.
    @Test func aPinnedContextsInsertsAreSaved() throws {
        let setup = try Setup()
        try setup.reader.performAndWait {
            try setup.reader.setQueryGenerationFrom(.current)
            _ = try setup.reader.count(for: Setup.companies())
            Company(context: setup.reader).symbol = "E"
            try setup.reader.save()
        }
        #expect(try setup.latest().count == 3)
        #expect(try setup.view(in: setup.reader).count == 3)
    }
}

/// What the reads on several queues saw.
private final class Views: @unchecked Sendable {
    // @unchecked Sendable: `list` is touched only under `lock`.
    private let lock = NSLock()
    private var list: [String] = []

    func append(_ view: String) { lock.withLock { list.append(view) } }
    var all: [String] { lock.withLock { list } }
}
