@_spi(DataStackInternal) import DataStackSQLite
import DataStackStores
import Foundation
import ObjectGraph
import Synchronization
import Testing

/// FetchedResultsController on one context: fetching, sections, index paths,
/// local changes, merged saves, reset, batches and the `changes` sequence.
@Suite struct FetchedResultsControllerCoreTests {
    // MARK: - Helpers

    /// Saves companies `C0`, `C1`… with the given employee counts and names; returns their IDs.
    @discardableResult
    private func seed(_ stack: TestStack, employees: [Int], names: [String?]? = nil) throws -> [ObjectID] {
        let context = stack.newContext()
        return try context.performAndWait {
            let companies = employees.enumerated().map { index, count -> Company in
                let company = Company(context: context)
                company.symbol = "C\(index)"
                company.employees = count
                company.name = names?[index]
                return company
            }
            try context.save()
            return companies.map(\.objectID)
        }
    }

    /// Companies sorted by employees, most first, optionally limited and filtered.
    private func request(limit: Int = 0, predicate: String? = nil, batchSize: Int = 0) throws -> FetchRequest<Company> {
        var request = FetchRequest<Company>()
        request.sortDescriptors = [FetchSort(key: "employees", ascending: false)]
        request.fetchLimit = limit
        request.fetchBatchSize = batchSize
        if let predicate { request.predicate = try FetchPredicate(format: predicate) }
        return request
    }

    /// What a fresh fetch returns, by ID, without registering anything.
    private func freshIDs(_ request: FetchRequest<Company>, in context: ManagedObjectContext) throws -> [ObjectID] {
        var ids = FetchRequest<ObjectID>(entityName: request.entityName)
        ids.resultType = .managedObjectID
        ids.predicate = request.predicate
        ids.sortDescriptors = request.sortDescriptors
        ids.fetchLimit = request.fetchLimit
        return try context.fetch(ids)
    }

    /// Saves changes made by `body` in a new context and returns what the save wrote.
    /// Fetches with a change log as the delegate (held by the caller: the
    /// delegate is weak) that starts from the fetched snapshot.
    private func fetch(_ controller: FetchedResultsController<Company>) throws -> ChangeLog<Company> {
        let log = ChangeLog<Company>()
        controller.delegate = log
        try controller.performFetch()
        log.previous = try #require(controller.snapshot)
        return log
    }

    private func saveElsewhere(_ stack: TestStack, _ body: (ManagedObjectContext) throws -> Void) throws -> ContextDidSave {
        let context = stack.newContext()
        return try context.performAndWait {
            try body(context)
            let inserted = Array(context.insertedObjects)
            let updated = Set(context.updatedObjects.map(\.objectID))
            let deleted = Set(context.deletedObjects.map(\.objectID))
            try context.save()
            return ContextDidSave(insertedObjectIDs: Set(inserted.map(\.objectID)), updatedObjectIDs: updated, deletedObjectIDs: deleted)
        }
    }

    /// Counts the SELECTs the SQLite store runs during `body`.
    private func selects<T>(_ stack: TestStack, _ body: () throws -> T) rethrows -> (T, [String]) {
        guard let store = stack.coordinator.persistentStores.first as? SQLiteStore else { return (try body(), []) }
        let log = FRCStatementLog()
        store.traceStatements { log.append($0) }
        defer { store.traceStatements(nil) }
        let result = try body()
        return (result, log.statements.filter { $0.uppercased().hasPrefix("SELECT") })
    }

    // MARK: - Fetching

    @Test func performFetchListsTheMatchesInOrderWithoutRegisteringObjects() throws {
        let stack = try TestStack()
        try seed(stack, employees: [5, 50, 20, 40, 10])
        let context = stack.newContext()
        try context.performAndWait {
            let controller = FetchedResultsController(fetchRequest: try request(predicate: "employees > 8"), managedObjectContext: context)
            #expect(controller.fetchedObjectIDs == nil)
            let (_, sql) = try selects(stack) { try controller.performFetch() }
            #expect(sql.count == 1)
            #expect(context.registeredObjects.isEmpty)
            #expect(controller.fetchedObjectIDs == (try freshIDs(try request(predicate: "employees > 8"), in: context)))
            #expect(controller.fetchedObjects?.map(\.employees) == [50, 40, 20, 10])
            #expect(controller.sections?.count == 1)
            #expect(controller.sections?.first?.numberOfObjects == 4)
            let third = controller.object(at: FetchedIndexPath(item: 2, section: 0))
            #expect(third.employees == 20)
            #expect(controller.indexPath(forObject: third) == FetchedIndexPath(item: 2, section: 0))
            #expect(FetchedIndexPath(IndexPath(indexes: [0, 2])) == FetchedIndexPath(item: 2, section: 0))
        }
    }

    @Test func aRequestWithoutSortDescriptorsOrWithUngroupedSectionsThrows() throws {
        let stack = try TestStack()
        try seed(stack, employees: [1, 2, 3], names: ["b", "a", "b"])
        let context = stack.newContext()
        try context.performAndWait {
            let unsorted = FetchedResultsController(fetchRequest: FetchRequest<Company>(), managedObjectContext: context)
            #expect(throws: FetchedResultsControllerError.self) { try unsorted.performFetch() }
            // Sorted by employees, sectioned by name: "b", "a", "b" is not grouped.
            let ungrouped = FetchedResultsController(fetchRequest: try request(), managedObjectContext: context, sectionNameKeyPath: "name")
            #expect { try ungrouped.performFetch() } throws: { ($0 as? FetchedResultsControllerError)?.code == .sectionsNotGrouped }
        }
    }

    @Test func sectionsFollowTheSectionKeyPath() throws {
        let stack = try TestStack()
        try seed(stack, employees: [1, 2, 3, 4, 5], names: ["beta", "alpha", "beta", nil, "alpha"])
        let context = stack.newContext()
        try context.performAndWait {
            var request = FetchRequest<Company>()
            request.sortDescriptors = [FetchSort(key: "name"), FetchSort(key: "employees")]
            let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "name")
            try controller.performFetch()
            let sections = try #require(controller.sections)
            #expect(sections.map(\.name) == ["", "alpha", "beta"])
            #expect(sections.map(\.numberOfObjects) == [1, 2, 2])
            #expect(sections[2].objects.map(\.employees) == [1, 3])
            #expect(controller.sectionIndexTitles == ["A", "B"])
            let object = controller.object(at: FetchedIndexPath(item: 1, section: 1))
            #expect(object.employees == 5)
            #expect(controller.indexPath(forObject: object) == FetchedIndexPath(item: 1, section: 1))
        }
    }

    // MARK: - Local changes

    @Test func localChangesArriveAsOneKeyedDiffInCoreDataOrder() throws {
        let stack = try TestStack()
        let ids = try seed(stack, employees: [10, 20, 30], names: ["a", "a", "b"])
        let context = stack.newContext()
        try context.performAndWait {
            var request = FetchRequest<Company>()
            request.sortDescriptors = [FetchSort(key: "name"), FetchSort(key: "employees")]
            let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context, sectionNameKeyPath: "name")
            let log = try fetch(controller)

            let first = try context.existingObject(with: ids[0]) as! Company
            let second = try context.existingObject(with: ids[1]) as! Company
            first.employees = 25          // moves after C1 in section "a"
            second.symbol = "renamed"     // changes without moving
            context.delete(try context.existingObject(with: ids[2]))   // section "b" empties
            let created = Company(context: context)
            created.symbol = "NEW"
            created.name = "c"
            created.employees = 1
            context.processPendingChanges()

            #expect(log.changes.count == 1)
            #expect(log.failures.isEmpty)
            #expect(log.calls.first == "will")
            #expect(log.calls.dropFirst().prefix(2).allSatisfy { $0.hasPrefix("section") })
            #expect(Array(log.calls.suffix(2)) == ["did", "snapshot"])
            let difference = try #require(log.changes.first?.difference)
            #expect(difference.sectionChanges.map(\.type) == [.delete, .insert])
            #expect(difference.deletes.map(\.objectID) == [ids[2]])
            #expect(difference.inserts.map(\.objectID) == [created.objectID])
            #expect(difference.moves.map(\.objectID) == [ids[0]])
            #expect(difference.updates.map(\.objectID) == [ids[1]])
            #expect(controller.fetchedObjects?.map(\.symbol) == ["renamed", "C0", "NEW"])
            #expect(controller.sections?.map(\.name) == ["a", "c"])

            // Nothing relevant changed: no callbacks.
            context.processPendingChanges()
            #expect(log.changes.count == 1)
        }
    }

    // MARK: - Merged saves

    @Test(arguments: allStoreTypes)
    func aMergedSaveLetsUnloadedObjectsEnterAndLeaveWithOneQuery(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let ids = try seed(stack, employees: Array(stride(from: 10, through: 200, by: 10)))   // 20 companies
        let context = stack.newContext()
        let request = try request(limit: 5, predicate: "employees >= 50")
        try context.performAndWait {
            let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context)
            let log = try fetch(controller)
            #expect(controller.fetchedObjectIDs == Array(ids.suffix(5).reversed()))
            #expect(context.registeredObjects.isEmpty)

            // Elsewhere: C0 (10, never loaded here) jumps to the top, C3 (40) rises but stays
            // out, and a new company enters below C0.
            let save = try saveElsewhere(stack) { other in
                (try other.existingObject(with: ids[0]) as! Company).employees = 1_000
                (try other.existingObject(with: ids[3]) as! Company).employees = 45
                let company = Company(context: other)
                company.symbol = "NEW"
                company.employees = 500
            }
            let (_, sql) = selects(stack) { context.mergeChanges(fromContextDidSave: save) }
            #expect(controller.fetchedObjectIDs == (try freshIDs(request, in: context)))
            #expect(controller.fetchedObjectIDs?.first == ids[0])
            #expect(log.changes.count == 1)
            #expect(log.failures.isEmpty)
            #expect(context.registeredObjects.isEmpty)
            if type == .sqlite {
                #expect(sql.count == 1, "one re-check query: \(sql)")
                #expect(sql.first?.contains("t0.Z_PK IN (") == true)
                #expect(sql.first?.contains("LIMIT 5") == true)
            }

            // Elsewhere: the top company stops matching and another drops to the bottom of the
            // table; the list refills from the store with one more query.
            let top = try #require(controller.fetchedObjectIDs?.first)
            let second = try #require(controller.fetchedObjectIDs?.dropFirst().first)
            let drop = try saveElsewhere(stack) { other in
                (try other.existingObject(with: top) as! Company).employees = 1
                (try other.existingObject(with: second) as! Company).employees = 55
            }
            let (_, refill) = selects(stack) { context.mergeChanges(fromContextDidSave: drop) }
            #expect(controller.fetchedObjectIDs == (try freshIDs(request, in: context)))
            #expect(log.changes.count == 2)
            #expect(log.failures.isEmpty)
            if type == .sqlite { #expect(refill.count == 2, "re-check and refill: \(refill)") }

            // A save that does not touch the list's entity costs nothing and says nothing.
            let unrelated = try saveElsewhere(stack) { other in
                let update = StockUpdate(context: other)
                update.price = 1
            }
            let (_, none) = selects(stack) { context.mergeChanges(fromContextDidSave: unrelated) }
            #expect(none.isEmpty)
            #expect(log.changes.count == 2)
        }
    }

    @Test func deletesMergedFromElsewhereLeaveTheList() throws {
        let stack = try TestStack()
        let ids = try seed(stack, employees: [1, 2, 3, 4])
        let context = stack.newContext()
        try context.performAndWait {
            let controller = FetchedResultsController(fetchRequest: try request(), managedObjectContext: context)
            let log = try fetch(controller)
            _ = controller.fetchedObjects   // loaded and kept, as a view would
            let save = try saveElsewhere(stack) { other in
                other.delete(try other.existingObject(with: ids[1]))
                other.delete(try other.existingObject(with: ids[3]))
            }
            context.mergeChanges(fromContextDidSave: save)
            #expect(controller.fetchedObjectIDs == [ids[2], ids[0]])
            #expect(log.changes.last?.difference.deletes.map(\.objectID) == [ids[3], ids[1]])
            #expect(log.failures.isEmpty)
        }
    }

    @Test func aSortKeyChangeMovesTheObject() throws {
        let stack = try TestStack()
        let ids = try seed(stack, employees: [10, 20, 30, 40])
        let context = stack.newContext()
        try context.performAndWait {
            let controller = FetchedResultsController(fetchRequest: try request(), managedObjectContext: context)
            let log = try fetch(controller)
            // Unloaded here: the move is found with the store's sort key.
            let save = try saveElsewhere(stack) { other in
                (try other.existingObject(with: ids[0]) as! Company).employees = 35
            }
            context.mergeChanges(fromContextDidSave: save)
            #expect(controller.fetchedObjectIDs == [ids[3], ids[0], ids[2], ids[1]])
            let difference = try #require(log.changes.last?.difference)
            #expect(difference.moves.map(\.objectID) == [ids[0]])
            #expect(difference.moves.first?.indexPath == FetchedIndexPath(item: 3, section: 0))
            #expect(difference.moves.first?.newIndexPath == FetchedIndexPath(item: 1, section: 0))
            #expect(difference.inserts.isEmpty && difference.deletes.isEmpty && difference.updates.isEmpty)
            #expect(log.failures.isEmpty)
        }
    }

    @Test func selfInObjectIDsCompilesToAPrimaryKeyLookup() throws {
        let stack = try TestStack()
        let ids = try seed(stack, employees: [1, 2, 3, 4])
        let context = stack.newContext()
        let (found, sql) = try selects(stack) {
            try context.performAndWait {
                var request = FetchRequest<ObjectID>(entityName: "Company")
                request.resultType = .managedObjectID
                request.predicate = try FetchPredicate(format: "SELF IN %@ AND employees > 1", argumentArray: [[ids[0], ids[2], ids[3]]])
                request.sortDescriptors = [FetchSort(key: "employees")]
                return try context.fetch(request)
            }
        }
        #expect(found == [ids[2], ids[3]])
        let query = try #require(sql.first)
        #expect(query.contains("t0.Z_PK IN (?1, ?2, ?3)"))
        // SQLite answers it by rowid lookups, not by scanning the table.
        let plan = try Connection(path: stack.storeURL.path).prepare("EXPLAIN QUERY PLAN " + query)
        var details: [String] = []
        while try plan.step() { details.append(plan.string(at: 3) ?? "") }
        #expect(details.contains { $0.contains("INTEGER PRIMARY KEY") }, "\(details)")
        #expect(!details.contains { $0.hasPrefix("SCAN") }, "\(details)")
    }

    @Test func aListWithAnOffsetFetchesItsWindowAgain() throws {
        let stack = try TestStack()
        let ids = try seed(stack, employees: [10, 20, 30, 40, 50])
        let context = stack.newContext()
        var request = try request(limit: 2)
        request.fetchOffset = 1
        try context.performAndWait {
            let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context)
            let log = try fetch(controller)
            #expect(controller.fetchedObjectIDs == [ids[3], ids[2]])
            let save = try saveElsewhere(stack) { other in
                (try other.existingObject(with: ids[0]) as! Company).employees = 100
            }
            context.mergeChanges(fromContextDidSave: save)
            #expect(controller.fetchedObjectIDs == [ids[4], ids[3]])
            #expect(log.failures.isEmpty)
        }
    }

    // MARK: - Reset, batches, changes

    @Test func resetFetchesTheListAgain() throws {
        let stack = try TestStack()
        let ids = try seed(stack, employees: [1, 2, 3])
        let context = stack.newContext()
        try context.performAndWait {
            let controller = FetchedResultsController(fetchRequest: try request(), managedObjectContext: context)
            let log = try fetch(controller)
            let before = try #require(controller.fetchedObjects)
            // A change the context never hears about, then a reset.
            _ = try saveElsewhere(stack) { other in
                (try other.existingObject(with: ids[0]) as! Company).employees = 99
            }
            context.reset()
            #expect(controller.fetchedObjectIDs == [ids[0], ids[2], ids[1]])
            let after = try #require(controller.fetchedObjects)
            #expect(after.map(\.employees) == [99, 3, 2])
            #expect(!after.contains { object in before.contains { $0 === object } })
            #expect(log.changes.count == 1)
            #expect(log.failures.isEmpty)
        }
    }

    @Test func aBatchSizeKeepsOnlyAWindowRegistered() throws {
        let stack = try TestStack()
        try seed(stack, employees: Array(1...200))
        let context = stack.newContext()
        try context.performAndWait {
            let controller = FetchedResultsController(fetchRequest: try request(batchSize: 20), managedObjectContext: context)
            try controller.performFetch()
            #expect(context.registeredObjects.isEmpty)
            do {
                let (object, sql) = selects(stack) { controller.object(at: FetchedIndexPath(item: 150, section: 0)) }
                #expect(object.employees == 50)
                #expect(sql.count == 1)   // the whole batch in one query
                #expect(context.registeredObjects.count == 20)
            }
            for item in stride(from: 0, to: 200, by: 10) {
                _ = controller.object(at: FetchedIndexPath(item: item, section: 0)).employees
            }
            #expect(context.registeredObjects.count <= 40)
            #expect(controller.fetchedObjects?.count == 200)
        }
    }

    @Test func changesStartWithTheListAndYieldOneElementPerChange() async throws {
        let stack = try TestStack()
        let ids = try seed(stack, employees: [1, 2])
        let context = stack.newContext()
        let box = try context.performAndWait {
            let controller = FetchedResultsController(fetchRequest: try request(), managedObjectContext: context)
            try controller.performFetch()
            return ControllerBox(controller, stream: controller.changes)
        }
        var iterator = box.stream.makeAsyncIterator()
        let first = try #require(await iterator.next())
        #expect(first.snapshot.itemIdentifiers == [ids[1], ids[0]])
        #expect(first.difference.inserts.count == 2)
        try context.performAndWait {
            (try context.existingObject(with: ids[0]) as! Company).employees = 5
            context.processPendingChanges()
        }
        let second = try #require(await iterator.next())
        #expect(second.snapshot.itemIdentifiers == [ids[0], ids[1]])
        #expect(second.difference.replayed(on: first.snapshot) == second.snapshot)
        withExtendedLifetime(box) {}
    }

    @Test func aChildContextListSeesItsParentsState() throws {
        let stack = try TestStack()
        let ids = try seed(stack, employees: [1, 2, 3])
        let parent = stack.newContext()
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        try parent.performAndWait {
            (try parent.existingObject(with: ids[0]) as! Company).employees = 10   // unsaved in the parent
        }
        try child.performAndWait {
            let controller = FetchedResultsController(fetchRequest: try request(limit: 2), managedObjectContext: child)
            try controller.performFetch()
            #expect(controller.fetchedObjectIDs == [ids[0], ids[2]])
            let company = Company(context: child)
            company.symbol = "CHILD"
            company.employees = 5
            child.processPendingChanges()
            #expect(controller.fetchedObjectIDs == [ids[0], company.objectID])
        }
    }
}

// MARK: - Test doubles

/// Records a controller's delegate calls and replays each difference on the
/// snapshot before it, collecting those that don't give the new snapshot.
final class ChangeLog<Result: ManagedObject>: FetchedResultsControllerDelegate {
    var calls: [String] = []
    var changes: [FetchedResultsChange] = []
    var failures: [String] = []
    var previous = FetchedResultsSnapshot()

    func controllerWillChangeContent(_ controller: FetchedResultsController<Result>) { calls.append("will") }
    func controller(_ controller: FetchedResultsController<Result>, didChangeSection name: String,
                    atSectionIndex sectionIndex: Int, for type: FetchedResultsChangeType) {
        calls.append("section \(type) \(name)")
    }
    func controller(_ controller: FetchedResultsController<Result>, didChange objectID: ObjectID,
                    at indexPath: FetchedIndexPath?, for type: FetchedResultsChangeType, newIndexPath: FetchedIndexPath?) {
        calls.append("object \(type)")
    }
    func controllerDidChangeContent(_ controller: FetchedResultsController<Result>) { calls.append("did") }
    func controller(_ controller: FetchedResultsController<Result>, didChangeContentWith change: FetchedResultsChange) {
        calls.append("snapshot")
        if change.difference.replayed(on: previous) != change.snapshot {
            failures.append("difference \(change.difference) does not turn \(previous) into \(change.snapshot)")
        }
        if change.snapshot != controller.snapshot { failures.append("snapshot differs from the controller's") }
        previous = change.snapshot
        changes.append(change)
    }
}

/// Carries a controller out of `performAndWait` to keep it alive.
// @unchecked Sendable: the controller is only used on its context's queue.
final class ControllerBox<Result: ManagedObject>: @unchecked Sendable {
    let controller: FetchedResultsController<Result>
    let stream: AsyncStream<FetchedResultsChange>
    init(_ controller: FetchedResultsController<Result>, stream: AsyncStream<FetchedResultsChange>) {
        self.controller = controller
        self.stream = stream
    }
}

/// SQL seen by a store trace.
final class FRCStatementLog: Sendable {
    private let recorded = Mutex<[String]>([])
    func append(_ sql: String) { recorded.withLock { $0.append(sql) } }
    var statements: [String] { recorded.withLock { $0 } }
}
