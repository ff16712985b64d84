import Foundation
import ObjectGraph
import Testing
import DataStackStores

/// A context's objects: uniquing, registration, lookups, change sets,
/// rollback, reset and refresh.
@Suite struct ContextTests {
    // MARK: - Uniquing and registration

    @Test(arguments: allStoreTypes)
    func oneObjectPerIDInAContextAndAnotherInEachOtherContext(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let id = try stack.seedCompanies(["ACME"])[0]
        let context = stack.newContext()
        let other = stack.newContext()
        try context.performAndWait {
            let fetched = try #require(try context.fetch(FetchRequest<Company>()).first)
            let again = try #require(try context.fetch(FetchRequest<Company>()).first)
            #expect(fetched === again)
            #expect(context.object(with: id) === fetched)
            #expect(try context.existingObject(with: id) === fetched)
            #expect(context.registeredObject(for: id) === fetched)
            try other.performAndWait {
                let theirs = try other.existingObject(with: id)
                #expect(theirs !== fetched)
                #expect(theirs.objectID == fetched.objectID)
            }
        }
    }

    @Test(arguments: allStoreTypes)
    func unchangedObjectsLeaveTheContextWhenReleasedAndChangedOnesStay(type: StoreType) throws {
        let stack = try TestStack(type: type)
        try stack.seedCompanies(["A", "B", "C"])
        let context = stack.newContext()
        try context.performAndWait {
            try fetchAndChangeOne(in: context)
            let remaining = context.registeredObjects
            #expect(remaining.count == 1)
            #expect((try remaining.first?.value(forKey: "symbol")) as? String == "A")
            #expect(remaining.first?.isUpdated == true)

            // A fetch brings the others back, once more as new instances.
            let all = try context.fetch(FetchRequest<Company>())
            #expect(all.count == 3)
            #expect(context.registeredObjects.count == 3)
        }
    }

    /// Fetches every company, changes A, and lets the array go.
    private func fetchAndChangeOne(in context: ManagedObjectContext) throws {
        var request = FetchRequest<Company>()
        request.sortDescriptors = [FetchSort(key: "symbol")]
        let companies = try context.fetch(request)
        #expect(context.registeredObjects.count == 3)
        companies[0].name = "changed"
    }

    @Test func retainsRegisteredObjectsKeepsUnchangedObjectsAlive() throws {
        let stack = try TestStack(type: .sqlite)
        try stack.seedCompanies(["A", "B"])
        let context = stack.newContext()
        context.retainsRegisteredObjects = true
        try context.performAndWait {
            _ = try context.fetch(FetchRequest<Company>()).count
            #expect(context.registeredObjects.count == 2)
        }
    }

    // MARK: - Lookups

    @Test(arguments: allStoreTypes)
    func existingObjectLoadsTheRowAndThrowsForAMissingOne(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let id = try stack.seedCompanies(["ACME"])[0]
        let store = stack.coordinator.persistentStores[0]
        let missing = store.newObjectID(for: id.entity, primaryKey: 999)
        let context = stack.newContext()
        try context.performAndWait {
            let company = try #require(try context.existingObject(with: id) as? Company)
            #expect(!company.isFault)
            #expect(company.symbol == "ACME")

            #expect(throws: ObjectGraphError.objectNotFound(missing)) { try context.existingObject(with: missing) }
            #expect("\(ObjectGraphError.objectNotFound(missing))".contains("/Company/p999"))
            #expect(context.registeredObject(for: missing) == nil)

            // A fault for the missing row, made first, does not change the answer.
            _ = context.object(with: missing)
            #expect(throws: ObjectGraphError.objectNotFound(missing)) { try context.existingObject(with: missing) }
        }
    }

    @Test func existingObjectOfAnUnsavedTemporaryIDFromElsewhereThrows() throws {
        let stack = try TestStack(type: .sqlite)
        let context = stack.newContext()
        let other = stack.newContext()
        let temporary = context.performAndWait { Company(context: context).objectID }
        _ = other.performAndWait {
            #expect(throws: ObjectGraphError.objectNotFound(temporary)) { try other.existingObject(with: temporary) }
        }
        context.performAndWait {
            #expect((try? context.existingObject(with: temporary)) != nil, "the inserting context knows it")
        }
    }

    @Test(arguments: allStoreTypes)
    func objectWithIDMakesAFaultWithoutReadingTheStore(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let id = try stack.seedCompanies(["ACME"])[0]
        let missing = stack.coordinator.persistentStores[0].newObjectID(for: id.entity, primaryKey: 999)
        let context = stack.newContext()
        context.performAndWait {
            let company = context.object(with: id)
            #expect(company.isFault)
            #expect(company is Company, "the entity's class")
            #expect(context.object(with: id) === company)
            #expect(context.registeredObject(for: id) === company)

            // No row behind it: still a fault, nothing thrown, nothing deleted yet.
            let ghost = context.object(with: missing)
            #expect(ghost.isFault)
            #expect(!ghost.isDeleted)
            #expect(!context.hasChanges)
        }
    }

    @Test(arguments: allStoreTypes)
    func registeredObjectNeverCreatesAnObject(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let id = try stack.seedCompanies(["ACME"])[0]
        let context = stack.newContext()
        context.performAndWait {
            #expect(context.registeredObject(for: id) == nil)
            #expect(context.registeredObjects.isEmpty)
            #expect(context.registeredObjectCount == 0)
        }
    }

    // MARK: - Change sets

    @Test(arguments: allStoreTypes)
    func insertedUpdatedAndDeletedObjectsTrackPendingChanges(type: StoreType) throws {
        let stack = try TestStack(type: type)
        try stack.seedCompanies(["A", "B"])
        let context = stack.newContext()
        try context.performAndWait {
            #expect(!context.hasChanges)
            var request = FetchRequest<Company>()
            request.sortDescriptors = [FetchSort(key: "symbol")]
            let existing = try context.fetch(request)
            let fresh = Company(context: context)
            fresh.symbol = "C"
            existing[0].name = "changed"
            context.delete(existing[1])

            #expect(context.hasChanges)
            #expect(context.insertedObjects == [fresh])
            #expect(context.updatedObjects == [existing[0]])
            #expect(context.deletedObjects == [existing[1]])
            #expect(try context.count(for: FetchRequest<Company>()) == 2)

            try context.save()
            #expect(!context.hasChanges)
            #expect(context.insertedObjects.isEmpty && context.updatedObjects.isEmpty && context.deletedObjects.isEmpty)
            #expect(try context.count(for: FetchRequest<Company>()) == 2)
            #expect(context.registeredObject(for: existing[1].objectID) == nil)
        }
    }

    @Test(arguments: allStoreTypes)
    func deleteAppliesCascadeAndNullifyRulesAtOnce(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let context = stack.newContext()
        try context.performAndWait {
            let company = Company(context: context)
            company.symbol = "ACME"
            let updates = (0..<3).map { _ in StockUpdate(context: context) }
            for update in updates { update.company = company }
            try context.save()

            context.delete(updates[0])
            #expect(company.updates.count == 2, "nullify removes it from the inverse")
            context.delete(company)
            #expect(updates[1].isDeleted && updates[2].isDeleted, "cascade deletes the rest")
            #expect(context.deletedObjects.count == 4)
            try context.save()
            #expect(try context.count(for: FetchRequest<StockUpdate>()) == 0)
        }
    }

    // MARK: - Rollback and reset

    @Test(arguments: allStoreTypes)
    func rollbackRestoresValuesAndDropsInsertsAndDeletes(type: StoreType) throws {
        let stack = try TestStack(type: type)
        try stack.seedCompanies(["A", "B"])
        let context = stack.newContext()
        try context.performAndWait {
            var request = FetchRequest<Company>()
            request.sortDescriptors = [FetchSort(key: "symbol")]
            let existing = try context.fetch(request)
            existing[0].symbol = "CHANGED"
            existing[0].employees = 99
            context.delete(existing[1])
            let fresh = Company(context: context)
            fresh.symbol = "NEW"

            context.rollback()
            #expect(!context.hasChanges)
            #expect(existing[0].symbol == "A")
            #expect(existing[0].employees == 10)
            #expect(!existing[0].isUpdated)
            #expect(!existing[1].isDeleted)
            #expect(existing[1].symbol == "B")
            #expect(fresh.managedObjectContext == nil)
            #expect(!fresh.isInserted)
            #expect(context.registeredObject(for: fresh.objectID) == nil)
            #expect(try context.count(for: FetchRequest<Company>()) == 2)

            try context.save()
        }
        let reader = stack.newContext()
        try reader.performAndWait {
            let symbols = try reader.fetch(FetchRequest<Company>()).map(\.symbol).sorted()
            #expect(symbols == ["A", "B"])
        }
    }

    @Test func objectsThatOutliveTheirContextHaveNoContext() throws {
        let stack = try TestStack()
        let id = try stack.seedCompanies(["A"])[0]
        var context: ManagedObjectContext? = stack.newContext()
        weak var gone: ManagedObjectContext?
        gone = context
        let (fetched, inserted) = try context!.performAndWait {
            let fetched = try context!.existingObject(with: id)
            let inserted = Company(context: context!)
            inserted.symbol = "NEW"
            return (fetched, inserted)
        }
        context = nil
        #expect(gone == nil, "nothing but the objects referred to the context, and they do not retain it")
        #expect(fetched.managedObjectContext == nil)
        #expect(inserted.managedObjectContext == nil)
        #expect((fetched as! Company).symbol == "A", "its values stay readable")
    }

    @Test(arguments: allStoreTypes)
    func resetForgetsEveryObject(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let id = try stack.seedCompanies(["A"])[0]
        let context = stack.newContext()
        try context.performAndWait {
            let company = try #require(try context.existingObject(with: id) as? Company)
            company.name = "unsaved"
            let fresh = Company(context: context)
            fresh.symbol = "NEW"

            context.reset()
            #expect(!context.hasChanges)
            #expect(context.registeredObjects.isEmpty)
            #expect(context.registeredObject(for: id) == nil)
            #expect(company.managedObjectContext == nil)
            #expect(fresh.managedObjectContext == nil)
            #expect(company.name == "unsaved", "a forgotten object can still be read, not saved")
            #expect(!company.hasChanges)

            let again = try #require(try context.existingObject(with: id) as? Company)
            #expect(again !== company)
            #expect(again.name == nil)
            try context.save()
            #expect(try context.count(for: FetchRequest<Company>()) == 1)
        }
    }

    // MARK: - Refresh

    /// On `context`'s queue: names company `id` "mine" there, while another
    /// context sets its employees to 500 (and its name, if given) and saves.
    private func editWhileAnotherContextSaves(_ id: ObjectID, in context: ManagedObjectContext, stack: TestStack,
                                              theirName: String?) throws -> Company {
        let company = try #require(try context.existingObject(with: id) as? Company)
        company.name = "mine"
        let other = stack.newContext()
        try other.performAndWait {
            let theirs = try #require(try other.existingObject(with: id) as? Company)
            theirs.employees = 500
            if let theirName { theirs.name = theirName }
            try other.save()
        }
        return company
    }

    @Test(arguments: allStoreTypes)
    func refreshWithoutMergingDiscardsChangesAndReloads(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let id = try stack.seedCompanies(["A"])[0]
        let context = stack.newContext()
        try context.performAndWait {
            let company = try editWhileAnotherContextSaves(id, in: context, stack: stack, theirName: nil)
            context.refresh(company, mergeChanges: false)
            #expect(company.isFault)
            #expect(!company.hasChanges)
            #expect(!context.hasChanges)
            #expect(company.name == nil)
            #expect(company.employees == 500)
        }
    }

    @Test(arguments: allStoreTypes)
    func refreshWithMergingKeepsLocalChangesOverTheStoresValues(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let id = try stack.seedCompanies(["A"])[0]
        let context = stack.newContext()
        try context.performAndWait {
            let company = try editWhileAnotherContextSaves(id, in: context, stack: stack, theirName: "theirs")
            context.refresh(company, mergeChanges: true)
            #expect(!company.isFault)
            #expect(company.isUpdated)
            #expect(company.name == "mine")
            #expect(company.employees == 500)
            #expect(try company.committedValues(forKeys: ["name"])["name"] as? String == "theirs")

            try context.save()   // the refreshed snapshot is current: no conflict
        }
        let reader = stack.newContext()
        try reader.performAndWait {
            let company = try #require(try reader.existingObject(with: id) as? Company)
            #expect(company.name == "mine")
            #expect(company.employees == 500)
        }
    }

    @Test(arguments: allStoreTypes)
    func refreshingAnUnchangedObjectTurnsItIntoAFault(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let id = try stack.seedCompanies(["A"])[0]
        let context = stack.newContext()
        try context.performAndWait {
            let company = try #require(try context.existingObject(with: id) as? Company)
            context.refresh(company, mergeChanges: true)
            #expect(company.isFault)
            #expect(company.symbol == "A")
            let fresh = Company(context: context)
            context.refresh(fresh, mergeChanges: false)
            #expect(fresh.isInserted, "an inserted object has nothing to reload")
        }
    }
}
