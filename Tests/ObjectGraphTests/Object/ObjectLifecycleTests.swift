import Foundation
import ObjectGraph
import Testing
import DataStackStores

/// An object's state flags, its change records and its lifecycle hooks.
@Suite struct ObjectLifecycleTests {
    @Test(arguments: allStoreTypes)
    func stateFlagsFollowInsertSaveUpdateAndDelete(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let context = stack.newContext()
        try context.performAndWait {
            let company = Company(context: context)
            company.symbol = "ACME"
            #expect(company.isInserted && !company.isUpdated && !company.isDeleted && !company.isFault)
            #expect(company.hasChanges)
            #expect(company.managedObjectContext === context)

            try context.save()
            #expect(!company.isInserted && !company.isUpdated && !company.isDeleted && !company.hasChanges)

            company.name = "Acme Corp"
            #expect(company.isUpdated && company.hasChanges && !company.isInserted)

            try context.save()
            #expect(!company.isUpdated && !company.hasChanges)

            context.delete(company)
            #expect(company.isDeleted && company.hasChanges && !company.isUpdated)

            try context.save()
            #expect(!company.isDeleted && !company.hasChanges)
            #expect(company.managedObjectContext == nil)
        }
    }

    @Test(arguments: allStoreTypes)
    func aFetchedFaultIsNeitherChangedNorLoadedUntilTouched(type: StoreType) throws {
        let stack = try TestStack(type: type)
        try stack.seedCompanies(["ACME"])
        let context = stack.newContext()
        try context.performAndWait {
            let company = try #require(try context.fetch(FetchRequest<Company>()).first)
            #expect(company.isFault)
            #expect(!company.hasChanges && !company.isInserted && !company.isUpdated && !company.isDeleted)
            _ = company.symbol
            #expect(!company.isFault)
            #expect(!company.hasChanges)
        }
    }

    @Test func deletingAnInsertedObjectForgetsItAndReinsertingSavesIt() throws {
        let stack = try TestStack(type: .sqlite)
        let context = stack.newContext()
        try context.performAndWait {
            let company = Company(context: context)
            company.symbol = "ACME"
            context.delete(company)
            #expect(company.isDeleted)
            #expect(context.insertedObjects.isEmpty)
            #expect(context.deletedObjects.isEmpty, "the store never hears of an unsaved object")
            #expect(context.hasChanges, "the deletion is a change until the next save, as in Core Data")

            context.insert(company)
            #expect(!company.isDeleted)
            #expect(company.isInserted)
            #expect(context.insertedObjects == [company])
            #expect(context.hasChanges)
            try context.save()
            #expect(!company.objectID.isTemporaryID)
        }
        #expect(try RawStore.int(stack.storeURL, "SELECT count(*) FROM ZCOMPANY") == 1)
    }

    @Test(arguments: allStoreTypes)
    func deletingAnInsertedObjectIsReportedAndSavesNothing(type: StoreType) throws {
        // Core Data keeps reporting it: JSQCoreDataKit's and BNR CoreDataStack's
        // public suites, run against Apple's Core Data, assert both.
        let stack = try TestStack(type: type)
        let context = stack.newContext()
        let changes = NotificationRecorder(ManagedObjectContext.objectsDidChangeNotification, object: context)
        try context.performAndWait {
            let company = Company(context: context)
            company.symbol = "GONE"
            context.processPendingChanges()
            context.delete(company)
            context.processPendingChanges()
            let last = try changes.notifications.last.map(ObjectsDidChange.init)
            #expect(last?.deletedObjectIDs == [company.objectID], "a monitor of changes hears of the deletion")
            #expect(context.hasChanges)
            #expect(context.deletedObjects.isEmpty && context.insertedObjects.isEmpty)

            let saves = NotificationRecorder(ManagedObjectContext.didSaveNotification, object: context)
            try context.save()
            #expect(!context.hasChanges)
            #expect(try saves.notifications.first.map(ContextDidSave.init)?.deletedObjectIDs.isEmpty == true, "the store never heard of it")

            let other = Company(context: context)
            context.delete(other)
            #expect(context.hasChanges)
            context.rollback()
            #expect(!context.hasChanges)
        }
        if type == .sqlite {
            #expect(try RawStore.int(stack.storeURL, "SELECT count(*) FROM ZCOMPANY") == 0)
        }
    }

    @Test(arguments: allStoreTypes)
    func reinsertingADeletedSavedObjectUndoesTheDelete(type: StoreType) throws {
        let stack = try TestStack(type: type)
        try stack.seedCompanies(["ACME"])
        let context = stack.newContext()
        try context.performAndWait {
            let company = try #require(try context.fetch(FetchRequest<Company>()).first)
            context.delete(company)
            #expect(context.deletedObjects == [company])
            context.insert(company)
            #expect(!company.isDeleted)
            #expect(context.deletedObjects.isEmpty)
            try context.save()
            #expect(try context.count(for: FetchRequest<Company>()) == 1)
        }
    }

    // MARK: - Change records

    @Test(arguments: allStoreTypes)
    func changedValuesListOnlyWhatDiffersFromTheLastSave(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let context = stack.newContext()
        try context.performAndWait {
            let company = Company(context: context)
            company.symbol = "ACME"
            company.employees = 0   // the default: not a change
            let inserted = company.changedValues()
            #expect(inserted.keys.sorted() == ["symbol"])
            #expect(inserted["symbol"] as? String == "ACME")

            try context.save()
            #expect(company.changedValues().isEmpty)

            company.name = "Acme"
            company.employees = 5
            let changed = company.changedValues()
            #expect(changed.keys.sorted() == ["employees", "name"])
            #expect(changed["employees"] as? Int == 5)
            #expect(changed["name"] as? String == "Acme")
        }
    }

    @Test(arguments: allStoreTypes)
    func committedValuesAreTheLastSavedOnes(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let context = stack.newContext()
        try context.performAndWait {
            let company = Company(context: context)
            company.symbol = "ACME"
            #expect(try company.committedValues(forKeys: nil).isEmpty, "an inserted object has no committed values")

            company.employees = 7
            try context.save()
            company.symbol = "NEW"
            company.employees = 8

            let some = try company.committedValues(forKeys: ["symbol", "employees"])
            #expect(some.keys.sorted() == ["employees", "symbol"])
            #expect(some["symbol"] as? String == "ACME")
            #expect(some["employees"] as? Int == 7)
            #expect(company.symbol == "NEW")

            let all = try company.committedValues(forKeys: nil)
            #expect(all.keys.sorted() == ["active", "employees", "founded", "name", "symbol", "updates"])
            #expect(all["active"] as? Bool == true)
        }
    }

    @Test(arguments: allStoreTypes)
    func committedValuesOfAFaultLoadItFirst(type: StoreType) throws {
        let stack = try TestStack(type: type)
        try stack.seedCompanies(["ACME"])
        let context = stack.newContext()
        try context.performAndWait {
            let company = try #require(try context.fetch(FetchRequest<Company>()).first)
            #expect(company.isFault)
            #expect(try company.committedValues(forKeys: ["symbol"])["symbol"] as? String == "ACME")
        }
    }

    // MARK: - Hooks

    @Test(arguments: allStoreTypes)
    func hooksRunInOrderAroundInsertAndSave(type: StoreType) throws {
        let stack = try TestStack(type: type, model: EngineTestModel.make())
        let context = stack.newContext()
        try context.performAndWait {
            let tracked = Tracked(context: context)
            #expect(tracked.calls == ["awakeFromInsert"])
            tracked.title = "first"
            try context.save()
            #expect(tracked.calls == ["awakeFromInsert", "willSave", "didSave"])

            tracked.title = "second"
            try context.save()
            #expect(tracked.calls == ["awakeFromInsert", "willSave", "didSave", "willSave", "didSave"])

            try context.save()   // nothing to save: no hooks
            #expect(tracked.calls.count == 5)
        }
    }

    @Test func awakeFromInsertRunsOnceEvenWhenReinserted() throws {
        let stack = try TestStack(type: .inMemory, model: EngineTestModel.make())
        let context = stack.newContext()
        try context.performAndWait {
            let tracked = Tracked(context: context)
            context.delete(tracked)
            context.insert(tracked)
            context.insert(tracked)
            try context.save()
            #expect(tracked.count(of: "awakeFromInsert") == 1)
            #expect(tracked.count(of: "prepareForDeletion") == 1)
        }
    }

    /// A stack whose store holds one `Tracked` object with this title.
    private func stackWithTracked(_ title: String, type: StoreType) throws -> TestStack {
        let stack = try TestStack(type: type, model: EngineTestModel.make())
        let writer = stack.newContext()
        try writer.performAndWait {
            Tracked(context: writer).title = title
            try writer.save()
        }
        return stack
    }

    @Test(arguments: allStoreTypes)
    func awakeFromFetchRunsOnceWhenAFaultFires(type: StoreType) throws {
        let stack = try stackWithTracked("stored", type: type)
        let context = stack.newContext()
        try context.performAndWait {
            let tracked = try #require(try context.fetch(FetchRequest<Tracked>()).first)
            #expect(tracked.calls.isEmpty)
            #expect(tracked.title == "stored")
            #expect(tracked.title == "stored")
            _ = try tracked.value(forKey: "title")
            #expect(tracked.calls == ["awakeFromFetch"])
        }
    }

    @Test(arguments: allStoreTypes)
    func prepareForDeletionRunsAtDeleteAndTheSaveHooksFollow(type: StoreType) throws {
        let stack = try stackWithTracked("doomed", type: type)
        let context = stack.newContext()
        try context.performAndWait {
            var request = FetchRequest<Tracked>()
            request.returnsObjectsAsFaults = false
            let tracked = try #require(try context.fetch(request).first)
            #expect(tracked.calls == ["awakeFromFetch"])
            context.delete(tracked)
            #expect(tracked.calls == ["awakeFromFetch", "prepareForDeletion"])
            context.delete(tracked)
            #expect(tracked.count(of: "prepareForDeletion") == 1, "deleting twice prepares once")
            try context.save()
            #expect(tracked.calls == ["awakeFromFetch", "prepareForDeletion", "willSave", "didSave"])
        }
    }

    @Test func changesMadeInWillSaveAreSaved() throws {
        final class Stamped: ManagedObject {
            @Managed var title: String?
            override func willSave() {
                if title == nil { title = "stamped" }
            }
        }
        let entity = EntityDescription(name: "Stamped", managedObjectClass: Stamped.self,
                                       properties: [AttributeDescription(name: "title", type: .string)])
        let stack = try TestStack(type: .sqlite, model: ManagedObjectModel(entities: [entity]))
        let context = stack.newContext()
        try context.performAndWait {
            _ = Stamped(context: context)
            try context.save()
            #expect(!context.hasChanges)
        }
        #expect(try RawStore.text(stack.storeURL, "SELECT ZTITLE FROM ZSTAMPED") == "stamped")
    }
}
