import Foundation
import Observation
import Synchronization
import Testing
import ObjectGraph
import DataStackStores

/// Counts the `onChange` calls of the trackings it starts (Observation's
/// `withObservationTracking`).
final class ObservationCounter: Sendable {
    private let calls = Mutex(0)

    /// How many times a tracking of this counter was told of a change.
    var count: Int { calls.withLock { $0 } }

    /// Runs `read` inside a tracking whose `onChange` this counter counts.
    func track<T>(_ read: () -> T) -> T {
        withObservationTracking(read) { [self] in
            calls.withLock { $0 += 1 }
        }
    }
}

/// `ManagedObject` is `Observable` (issue #38, SPEC §9.4): a typed read in an
/// observable context registers the property; changes by setters, key-value
/// writes, rollback, refresh, merges and reset call exactly the observers of
/// the properties whose values changed.
@Suite struct ObservationTests {
    /// Saves companies named by `symbols`; returns their IDs.
    private func seed(_ stack: TestStack, symbols: [String]) throws -> [ObjectID] {
        let context = stack.newContext()
        return try context.performAndWait {
            let companies = symbols.map { symbol -> Company in
                let company = Company(context: context)
                company.symbol = symbol
                company.employees = 10
                return company
            }
            try context.save()
            return companies.map(\.objectID)
        }
    }

    /// A context made observable.
    private func observableContext(_ stack: TestStack) -> ManagedObjectContext {
        let context = stack.newContext()
        context.isObservable = true
        return context
    }

    /// Saves new employee counts from another context; returns the save to merge.
    private func saveEmployees(_ employees: [ObjectID: Int], in stack: TestStack) throws -> ContextDidSave {
        let writer = stack.newContext()
        return try writer.performAndWait {
            for (id, count) in employees { (try writer.existingObject(with: id) as! Company).employees = count }
            let didSave = NotificationRecorder(ManagedObjectContext.didSaveNotification, object: writer)
            try writer.save()
            return try ContextDidSave(try #require(didSave.notifications.first))
        }
    }

    @Test func contextsAreNotObservableUntilAsked() throws {
        let stack = try TestStack()
        #expect(!ManagedObjectContext(concurrencyType: .mainQueue, coordinator: stack.coordinator).isObservable)
        #expect(!stack.newContext().isObservable)
    }

    @Test func aSetterCallsOnlyTheObserversOfThatPropertyOfThatObject() throws {
        let stack = try TestStack()
        let ids = try seed(stack, symbols: ["A", "B"])
        let context = observableContext(stack)
        try context.performAndWait {
            let a = try context.existingObject(with: ids[0]) as! Company
            let b = try context.existingObject(with: ids[1]) as! Company
            let aEmployees = ObservationCounter(), aSymbol = ObservationCounter(), bEmployees = ObservationCounter()
            #expect(aEmployees.track { a.employees } == 10)
            _ = aSymbol.track { a.symbol }
            _ = bEmployees.track { b.employees }
            a.employees = 11
            #expect(aEmployees.count == 1)
            #expect(aSymbol.count == 0)
            #expect(bEmployees.count == 0)
            a.employees = 12   // the tracking ended with its first change
            #expect(aEmployees.count == 1)
        }
    }

    @Test func setValueForKeyAndValueForKeyAreObservedAsTypedAccessIs() throws {
        let stack = try TestStack()
        let ids = try seed(stack, symbols: ["A"])
        let context = observableContext(stack)
        try context.performAndWait {
            let a = try context.existingObject(with: ids[0]) as! Company
            let typed = ObservationCounter(), byKey = ObservationCounter(), other = ObservationCounter()
            _ = typed.track { a.name }
            _ = byKey.track { try? a.value(forKey: "name") }
            _ = other.track { a.employees }
            try a.setValue("Acme", forKey: "name")
            #expect(typed.count == 1)
            #expect(byKey.count == 1)
            #expect(other.count == 0)
        }
    }

    @Test func aContextNotMadeObservableRegistersNothing() throws {
        let stack = try TestStack()
        let ids = try seed(stack, symbols: ["A"])
        let context = stack.newContext()
        try context.performAndWait {
            let a = try context.existingObject(with: ids[0]) as! Company
            let counter = ObservationCounter()
            _ = counter.track { a.employees }
            a.employees = 99
            #expect(counter.count == 0)
        }
    }

    @Test func writingTheSameValueCallsNoOne() throws {
        let stack = try TestStack()
        let ids = try seed(stack, symbols: ["A"])
        let context = observableContext(stack)
        try context.performAndWait {
            let a = try context.existingObject(with: ids[0]) as! Company
            let counter = ObservationCounter()
            _ = counter.track { a.employees }
            a.employees = 10
            #expect(counter.count == 0)
        }
    }

    @Test func aToManyObserverHearsOfAMemberAddedFromTheOtherSide() throws {
        let stack = try TestStack()
        let ids = try seed(stack, symbols: ["A"])
        let context = observableContext(stack)
        try context.performAndWait {
            let a = try context.existingObject(with: ids[0]) as! Company
            let updates = ObservationCounter(), symbol = ObservationCounter()
            #expect(updates.track { a.updates.count } == 0)
            _ = symbol.track { a.symbol }
            let update = StockUpdate(context: context)
            update.company = a   // the inverse, a.updates, changes too
            #expect(updates.count == 1)
            #expect(symbol.count == 0)
        }
    }

    @Test func rollbackCallsTheObserversOfTheChangedPropertiesOnly() throws {
        let stack = try TestStack()
        let ids = try seed(stack, symbols: ["A"])
        let context = observableContext(stack)
        try context.performAndWait {
            let a = try context.existingObject(with: ids[0]) as! Company
            a.employees = 50
            let employees = ObservationCounter(), symbol = ObservationCounter()
            #expect(employees.track { a.employees } == 50)
            _ = symbol.track { a.symbol }
            context.rollback()
            #expect(a.employees == 10)
            #expect(employees.count == 1)
            #expect(symbol.count == 0)
        }
    }

    @Test func refreshTellsOfDroppedChangesAndOfNewerStoredValuesAndLeavesAFault() throws {
        let stack = try TestStack()
        let ids = try seed(stack, symbols: ["A", "B"])
        let context = observableContext(stack)
        try context.performAndWait {
            let a = try context.existingObject(with: ids[0]) as! Company
            let b = try context.existingObject(with: ids[1]) as! Company
            // Dropped changes: a.name goes back to nil.
            a.name = "Draft"
            let name = ObservationCounter(), symbol = ObservationCounter()
            _ = name.track { a.name }
            _ = symbol.track { a.symbol }
            context.refresh(a, mergeChanges: false)
            #expect(a.isFault)
            #expect(name.count == 1)
            #expect(symbol.count == 0)
            // Newer stored values: another context saved b's employees.
            let employees = ObservationCounter(), bSymbol = ObservationCounter()
            _ = employees.track { b.employees }
            _ = bSymbol.track { b.symbol }
            _ = try saveEmployees([ids[1]: 77], in: stack)
            context.refresh(b, mergeChanges: true)
            #expect(b.isFault, "refreshing an unchanged object still leaves a fault")
            #expect(employees.count == 1)
            #expect(bSymbol.count == 0)
            #expect(b.employees == 77)
        }
    }

    @Test func aMergeCallsOnceTheObserversOfExactlyTheChangedPropertiesAndFaultsStayFaults() throws {
        let stack = try TestStack()
        let ids = try seed(stack, symbols: ["A", "B", "C"])
        let context = observableContext(stack)
        let (aEmployees, aSymbol, bEmployees, aAll) = (ObservationCounter(), ObservationCounter(), ObservationCounter(), ObservationCounter())
        // Held, as a screen holds what it shows (the registry lets go of objects nobody holds).
        let held = try context.performAndWait {
            let a = try context.existingObject(with: ids[0]) as! Company
            let b = try context.existingObject(with: ids[1]) as! Company
            let c = context.object(with: ids[2])   // a fault, never read
            _ = aEmployees.track { a.employees }
            _ = aSymbol.track { a.symbol }
            _ = bEmployees.track { b.employees }
            _ = aAll.track { (a.symbol, a.name, a.employees, a.founded, a.active) }
            return [a, b, c]
        }
        // a's employees change; b's and c's are saved with the values they had.
        let writer = stack.newContext()
        let save = try writer.performAndWait {
            let a = try writer.existingObject(with: ids[0]) as! Company
            a.employees = 20
            a.name = "Acme"
            a.active = false
            (try writer.existingObject(with: ids[1]) as! Company).name = "Bee"
            (try writer.existingObject(with: ids[2]) as! Company).employees = 30
            let didSave = NotificationRecorder(ManagedObjectContext.didSaveNotification, object: writer)
            try writer.save()
            return try ContextDidSave(try #require(didSave.notifications.first))
        }
        let change = context.performAndWait { context.mergeChanges(fromContextDidSave: save) }
        #expect(change.refreshedObjectIDs == Set(ids))
        #expect(aEmployees.count == 1)
        #expect(aSymbol.count == 0)
        #expect(bEmployees.count == 0, "b was saved, but not its employees")
        #expect(aAll.count == 1, "three of the five properties it read changed: one call")
        try context.performAndWait {
            #expect(try #require(context.registeredObject(for: ids[2])).isFault, "an unobserved fault stays a fault")
            let a = try #require(context.registeredObject(for: ids[0]) as? Company)
            #expect(a.isFault, "a merged object turns into a fault, observed or not")
            #expect(a.employees == 20)
        }
        withExtendedLifetime(held) {}
    }

    @Test func resetTellsTheObserversOfItsObjects() throws {
        let stack = try TestStack()
        let ids = try seed(stack, symbols: ["A"])
        let context = observableContext(stack)
        try context.performAndWait {
            let a = try context.existingObject(with: ids[0]) as! Company
            let counter = ObservationCounter()
            _ = counter.track { a.symbol }
            context.reset()
            #expect(counter.count == 1)
        }
    }

    @Test func aFetchedResultsControllersResultsAreObservable() throws {
        let stack = try TestStack()
        _ = try seed(stack, symbols: ["A", "B"])
        let context = observableContext(stack)
        try context.performAndWait {
            var request = FetchRequest<Company>()
            request.sortDescriptors = [FetchSort(key: "symbol", ascending: true)]
            let controller = FetchedResultsController(fetchRequest: request, managedObjectContext: context)
            try controller.performFetch()
            let objects = ObservationCounter(), sections = ObservationCounter()
            #expect(objects.track { controller.fetchedObjects?.map(\.symbol) } == ["A", "B"])
            #expect(sections.track { controller.sections?.first?.numberOfObjects } == 2)
            // A change that leaves the results as they were calls no one.
            context.processPendingChanges()
            #expect(objects.count == 0)
            let company = Company(context: context)
            company.symbol = "C"
            context.processPendingChanges()
            #expect(objects.count == 1)
            #expect(sections.count == 1)
            #expect(controller.fetchedObjects?.count == 3)
        }
    }
}
