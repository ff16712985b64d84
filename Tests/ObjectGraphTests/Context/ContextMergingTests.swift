import Foundation
import Synchronization
import Testing
import ObjectGraph
import DataStackStores

/// Notifications, `mergeChanges(fromContextDidSave:)` and automatic merging (SPEC §3.7, §3.8).
@Suite struct ContextMergingTests {
    /// Saves `count` companies and returns their IDs.
    private func seed(_ stack: TestStack, count: Int) throws -> [ObjectID] {
        let context = stack.newContext()
        return try context.performAndWait {
            let companies = (0..<count).map { index -> Company in
                let company = Company(context: context)
                company.symbol = "S\(index)"
                return company
            }
            try context.save()
            return companies.map(\.objectID)
        }
    }

    @Test func aMergeRefreshesOnlyObjectsSomeoneHoldsAndFreesTheOthers() throws {
        let stack = try TestStack()
        let ids = try seed(stack, count: 3)
        let receiver = stack.newContext()
        weak var dropped: ManagedObject?
        let kept = try receiver.performAndWait {
            let kept = try receiver.existingObject(with: ids[0])
            dropped = try receiver.existingObject(with: ids[1])
            _ = receiver.object(with: ids[2])   // a fault nobody holds
            return kept
        }
        let save = try saveEmployees(5, of: ids, in: stack)
        let change = receiver.performAndWait { receiver.mergeChanges(fromContextDidSave: save) }
        #expect(change.refreshedObjectIDs == [ids[0]])
        receiver.performAndWait {
            #expect(dropped == nil, "the registry let go of the object only it held")
            #expect(receiver.registeredObjectCount == 1)
            #expect((kept as! Company).employees == 5)
        }
    }

    @Test func aMergeReadsNothingAndTheRefreshedObjectsReloadTogetherOnFirstUse() throws {
        let stack = try TestStack()
        let ids = try seed(stack, count: 5)
        let store = try #require(stack.coordinator.persistentStores.first as? SQLiteStore)
        let receiver = stack.newContext()
        let shown = try receiver.performAndWait {
            try ids.prefix(3).map { try receiver.existingObject(with: $0) as! Company }
        }
        let edited = try receiver.performAndWait {
            let edited = try receiver.existingObject(with: ids[3]) as! Company
            edited.name = "local"
            return edited
        }
        let save = try saveEmployees(9, of: ids, in: stack)
        let log = StatementLog()
        store.traceStatements { log.append($0) }
        defer { store.traceStatements(nil) }
        receiver.performAndWait {
            let change = receiver.mergeChanges(fromContextDidSave: save)
            #expect(change.refreshedObjectIDs == Set(ids.prefix(4)))
            #expect(log.selects.count == 1, "one reload, for the object with unsaved changes only")
            #expect(edited.employees == 9 && edited.name == "local", "the new row under the local change")
            #expect(shown.allSatisfy { $0.isFault }, "unchanged objects turn into faults, as refresh(mergeChanges: true) does")
            #expect(shown[0].employees == 9)
            #expect(log.selects.count == 2, "one query brought back all three")
            #expect(shown.allSatisfy { !$0.isFault && $0.employees == 9 })
        }
    }

    @Test func theRegistryStaysBoundedWhileFaultsAreMadeAndDropped() throws {
        let stack = try TestStack()
        let ids = try seed(stack, count: 5_000)
        let context = stack.newContext()
        weak var first: ManagedObject?
        context.performAndWait {
            first = context.object(with: ids[0])
            for id in ids.dropFirst() { _ = context.object(with: id) }
            #expect(first == nil, "freed by a sweep while the registry grew")
            #expect(context.registeredObjectCount == 0)
            context.retainsRegisteredObjects = true
            let faults = ids.prefix(2_000).map { context.object(with: $0) }.count
            #expect(context.registeredObjectCount == faults)
        }
    }

    /// Sets `employees` of these companies in another context, saves, and returns the save.
    private func saveEmployees(_ employees: Int, of ids: [ObjectID], in stack: TestStack) throws -> ContextDidSave {
        let writer = stack.newContext()
        return try writer.performAndWait {
            for id in ids { (try writer.existingObject(with: id) as! Company).employees = employees }
            let didSave = NotificationRecorder(ManagedObjectContext.didSaveNotification, object: writer)
            try writer.save()
            return try ContextDidSave(try #require(didSave.notifications.first))
        }
    }

    @Test func processPendingChangesPostsObjectsDidChangeWithTheChangedIDs() throws {
        let stack = try TestStack()
        let ids = try seed(stack, count: 2)
        let context = stack.newContext()
        let recorder = NotificationRecorder(ManagedObjectContext.objectsDidChangeNotification, object: context)
        let insertedID = try context.performAndWait {
            (try context.existingObject(with: ids[0]) as! Company).employees = 3
            context.delete(try context.existingObject(with: ids[1]))
            let company = Company(context: context)
            company.symbol = "NEW"
            context.processPendingChanges()
            return company.objectID
        }
        let change = try ObjectsDidChange(try #require(recorder.notifications.last))
        #expect(change.updatedObjectIDs == [ids[0]])
        #expect(change.deletedObjectIDs == [ids[1]])
        #expect(change.insertedObjectIDs == [insertedID])
        #expect(throws: NotificationPayloadError.self) { try ContextDidSave(try #require(recorder.notifications.last)) }
    }

    @Test func saveNotificationsCarryTheSavedIDs() async throws {
        let stack = try TestStack()
        let ids = try seed(stack, count: 2)
        let context = stack.newContext()
        let willSave = NotificationRecorder(ManagedObjectContext.willSaveNotification, object: context)
        let didSave = NotificationRecorder(ManagedObjectContext.didSaveNotification, object: context)
        let events = context.events
        let (inserted, updated, deleted) = try context.performAndWait {
            let company = Company(context: context)
            company.symbol = "N"
            (try context.existingObject(with: ids[0]) as! Company).employees = 1
            context.delete(try context.existingObject(with: ids[1]))
            try context.save()
            return (company.objectID, ids[0], ids[1])
        }
        #expect(willSave.notifications.count == 1)
        let save = try ContextDidSave(try #require(didSave.notifications.first))
        #expect(save.insertedObjectIDs == [inserted])
        #expect(!inserted.isTemporaryID)
        #expect(save.updatedObjectIDs == [updated])
        #expect(save.deletedObjectIDs == [deleted])
        // The same events arrive through the asynchronous sequence.
        var sawDidSave = false
        for await event in events {
            if case .didSave(let payload) = event {
                #expect(payload == save)
                sawDidSave = true
                break
            }
        }
        #expect(sawDidSave)
    }

    @Test func aSaveWithoutChangesPostsNothing() throws {
        let stack = try TestStack()
        let context = stack.newContext()
        let didSave = NotificationRecorder(ManagedObjectContext.didSaveNotification, object: context)
        try context.performAndWait { try context.save() }
        #expect(didSave.notifications.isEmpty)
    }

    @Test(arguments: [StoreType.sqlite, .inMemory])
    func mergeTouchesOnlyRegisteredObjectsAndKeepsLocalEdits(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let ids = try seed(stack, count: 1_000)
        let receiver = stack.newContext()
        let shown = try receiver.performAndWait {
            let shown = try ids.prefix(10).map { try receiver.existingObject(with: $0) as! Company }
            shown[0].name = "local edit"
            return shown
        }
        let writer = stack.newContext()
        let save = try writer.performAndWait {
            var request = FetchRequest<Company>()
            request.returnsObjectsAsFaults = false
            for company in try writer.fetch(request) {
                company.employees += 7
                company.name = "writer"
            }
            writer.delete(try writer.existingObject(with: ids[1]))
            let extra = Company(context: writer)
            extra.symbol = "EXTRA"
            let didSave = NotificationRecorder(ManagedObjectContext.didSaveNotification, object: writer)
            try writer.save()
            return try ContextDidSave(try #require(didSave.notifications.first))
        }
        #expect(save.updatedObjectIDs.count == 999)
        let change = receiver.performAndWait { receiver.mergeChanges(fromContextDidSave: save) }
        #expect(change.refreshedObjectIDs == Set(ids.prefix(10)).subtracting([ids[1]]))
        #expect(change.deletedObjectIDs == [ids[1]])
        #expect(change.insertedObjectIDs == save.insertedObjectIDs)
        receiver.performAndWait {
            #expect(receiver.registeredObjectCount == 9)
            #expect(shown[0].name == "local edit")
            #expect(shown[0].employees == 7)
            #expect(shown[2].name == "writer")
            #expect(shown[1].managedObjectContext == nil)
            #expect(receiver.registeredObject(for: ids[1]) == nil)
        }
    }

    @Test func mergeCostDoesNotGrowWithTheSizeOfTheSave() throws {
        let stack = try TestStack()
        let ids = try seed(stack, count: 10)
        let receiver = stack.newContext()
        let held = try receiver.performAndWait { try ids.map { try receiver.existingObject(with: $0) } }
        let entity = try #require(stack.model.entitiesByName["Company"])
        let store = try #require(stack.coordinator.persistentStores.first)
        func save(of count: Int) -> ContextDidSave {
            // IDs of rows the receiver has never seen, plus the ten it shows.
            var updated = Set((1...count).map { store.newObjectID(for: entity, primaryKey: Int64(1_000_000 + $0)) })
            updated.formUnion(ids)
            return ContextDidSave(updatedObjectIDs: updated)
        }
        let small = save(of: 10), large = save(of: 100_000)
        let clock = ContinuousClock()
        var touched: [Int] = []
        var durations: [Duration] = []
        for payload in [small, large, small, large] {
            let start = clock.now
            let change = receiver.performAndWait { receiver.mergeChanges(fromContextDidSave: payload) }
            durations.append(clock.now - start)
            touched.append(change.refreshedObjectIDs.count)
        }
        // The objects touched are the ten registered ones, whatever the size of the save.
        #expect(touched == [10, 10, 10, 10])
        print("merge into 10 registered: K=20 \(durations[2]), K=100,010 \(durations[3])")
        withExtendedLifetime(held) {}
    }

    @Test func automaticallyMergesSavesOfSiblingsOnTheSameCoordinator() async throws {
        let stack = try TestStack()
        let id = try seed(stack, count: 1)[0]
        let watcher = stack.newContext()
        watcher.automaticallyMergesChangesFromParent = true
        let company = try watcher.performAndWait { try watcher.existingObject(with: id) as! Company }
        let merged = Signal.notification(ManagedObjectContext.objectsDidChangeNotification, from: watcher)
        let writer = stack.newContext()
        try writer.performAndWait {
            (try writer.existingObject(with: id) as! Company).employees = 42
            try writer.save()
        }
        await merged.wait(for: "the sibling's save merging into the watcher")
        let seen = watcher.performAndWait { company.employees }
        #expect(seen == 42)
    }

    @Test func automaticallyMergesSavesOfTheParent() async throws {
        let stack = try TestStack()
        let id = try seed(stack, count: 1)[0]
        let parent = stack.newContext()
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        child.automaticallyMergesChangesFromParent = true
        let company = try child.performAndWait { try child.existingObject(with: id) as! Company }
        let merged = Signal.notification(ManagedObjectContext.objectsDidChangeNotification, from: child)
        try parent.performAndWait {
            (try parent.existingObject(with: id) as! Company).employees = 8
            try parent.save()
        }
        await merged.wait(for: "the parent's save merging into the child")
        let seen = child.performAndWait { company.employees }
        #expect(seen == 8)
    }

    @Test func afterAMergeNoReadReturnsAnOlderRow() throws {
        // Two coordinators on one file, as the stack uses them.
        let stack = try TestStack()
        let id = try seed(stack, count: 1)[0]
        let other = PersistentStoreCoordinator(managedObjectModel: stack.model)
        try other.addPersistentStore(type: .sqlite, at: stack.storeURL)
        let reader = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: other)
        // The reader caches the row by fetching faults.
        try reader.performAndWait { _ = try reader.fetch(FetchRequest<Company>()) }
        let writer = stack.newContext()
        let didSave = NotificationRecorder(ManagedObjectContext.didSaveNotification, object: writer)
        try writer.performAndWait {
            (try writer.existingObject(with: id) as! Company).employees = 77
            try writer.save()
        }
        let save = try ContextDidSave(try #require(didSave.notifications.first))
        try reader.performAndWait {
            reader.mergeChanges(fromContextDidSave: save)
            let fresh = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: other)
            let value = try fresh.performAndWait { (try fresh.existingObject(with: id) as! Company).employees }
            #expect(value == 77)
            #expect((reader.object(with: id) as! Company).employees == 77)
        }
    }

    /// A second coordinator on the stack's file whose row cache holds the
    /// companies as seeded (0 employees), and a save of 5 employees each since,
    /// through the stack's coordinator: without a merge, the cached rows are stale.
    private func coordinatorWithStaleRows(_ stack: TestStack, _ ids: [ObjectID]) throws -> PersistentStoreCoordinator {
        let other = PersistentStoreCoordinator(managedObjectModel: stack.model)
        try other.addPersistentStore(type: .sqlite, at: stack.storeURL)
        let cached = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: other)
        try cached.performAndWait { _ = try cached.fetch(FetchRequest<Company>()) } // rows cached, objects released
        let writer = stack.newContext()
        try writer.performAndWait {
            for id in ids { (try writer.existingObject(with: id) as! Company).employees = 5 }
            try writer.save()
        }
        return other
    }

    @Test func stalenessIntervalDecidesWhetherACachedRowMayFireAFault() throws {
        let stack = try TestStack()
        let id = try seed(stack, count: 1)[0]
        let other = try coordinatorWithStaleRows(stack, [id])
        // An infinite interval uses the stale row, zero reads the store.
        let lenient = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: other)
        #expect(lenient.performAndWait { (lenient.object(with: id) as! Company).employees } == 0)
        let strict = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: other)
        strict.stalenessInterval = 0
        #expect(strict.performAndWait { (strict.object(with: id) as! Company).employees } == 5)
    }

    @Test func stalenessIntervalDecidesItForABatchOfFaultsToo() throws {
        let stack = try TestStack()
        let other = try coordinatorWithStaleRows(stack, try seed(stack, count: 3))
        // A batched fetch fires its batch at the first access: one read of all its rows.
        var request = FetchRequest<Company>()
        request.fetchBatchSize = 10
        request.sortDescriptors = [FetchSort(key: "symbol")]
        let lenient = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: other)
        #expect(try lenient.performAndWait { try lenient.fetch(request).map(\.employees) } == [0, 0, 0])
        let strict = ManagedObjectContext(concurrencyType: .privateQueue, coordinator: other)
        strict.stalenessInterval = 0
        #expect(try strict.performAndWait { try strict.fetch(request).map(\.employees) } == [5, 5, 5])
    }

    @Test func refreshWithoutMergingDiscardsChangesAndWithMergingKeepsThem() throws {
        let stack = try TestStack()
        let id = try seed(stack, count: 1)[0]
        let context = stack.newContext()
        let writer = stack.newContext()
        try context.performAndWait {
            let company = try context.existingObject(with: id) as! Company
            company.name = "mine"
            try writer.performAndWait {
                (try writer.existingObject(with: id) as! Company).employees = 11
                try writer.save()
            }
            context.refresh(company, mergeChanges: true)
            #expect(company.name == "mine")
            #expect(company.employees == 11)
            #expect(company.hasChanges)
            context.refresh(company, mergeChanges: false)
            #expect(company.isFault)
            #expect(!company.hasChanges)
            #expect(company.name == nil)
            #expect(company.employees == 11)
        }
    }
}

/// Records the notifications of one name (and sender) posted while it lives.
final class NotificationRecorder: Sendable {
    // @unchecked Sendable: notifications are appended and read under the mutex only.
    private final class Log: @unchecked Sendable {
        var items: [Notification] = []
        let lock = NSLock()
    }
    private let log = Log()
    private let token: TokenBox

    init(_ name: Notification.Name, object: AnyObject?) {
        let log = self.log
        token = TokenBox(NotificationCenter.default.addObserver(forName: name, object: object, queue: nil) { notification in
            log.lock.withLock { log.items.append(notification) }
        })
    }

    deinit { NotificationCenter.default.removeObserver(token.token) }

    var notifications: [Notification] { log.lock.withLock { log.items } }
}

// @unchecked Sendable: an opaque NotificationCenter token, only handed back to it.
final class TokenBox: @unchecked Sendable {
    let token: any NSObjectProtocol
    init(_ token: any NSObjectProtocol) { self.token = token }
}
