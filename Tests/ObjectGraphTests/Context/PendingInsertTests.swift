import Foundation
import Testing
@testable import ObjectGraph
import DataStackStores

#if os(Linux)
// glibc's, which its module does not export (it is declared in <malloc.h>).
@_silgen_name("malloc_usable_size")
private func mallocUsableSize(_ pointer: UnsafeMutableRawPointer?) -> Int
#endif

/// Pending inserts kept as a list of marked objects, and the inserted IDs of
/// notification payloads built as sets only when read (issue #36): what is
/// reported must be what a set kept per insert reported.
@Suite struct PendingInsertTests {
    @Test func aPendingInsertIsReportedOnceUnderItsCurrentID() throws {
        let stack = try TestStack(type: .sqlite)
        let context = stack.newContext()
        let changes = NotificationRecorder(ManagedObjectContext.objectsDidChangeNotification, object: context)
        try context.performAndWait {
            let company = Company(context: context)
            company.symbol = "A"
            // Inserting again changes nothing; a permanent ID given before the
            // report is the one reported.
            context.insert(company)
            try context.obtainPermanentIDs(for: [company])
            context.processPendingChanges()
            let change = try #require(try changes.notifications.last.map(ObjectsDidChange.init))
            #expect(change.insertedObjectIDs == [company.objectID])
            #expect(!company.objectID.isTemporaryID)

            // Reported once: later reports do not list it again.
            let reported = changes.notifications.count
            company.symbol = "B"
            let other = Company(context: context)
            context.processPendingChanges()
            let later = try changes.notifications.dropFirst(reported).map(ObjectsDidChange.init)
            #expect(later.count == 1)
            #expect(later.first?.insertedObjectIDs == [other.objectID])
        }
    }

    @Test func anObjectInsertedAndDeletedBeforeTheReportIsReportedDeletedOnly() throws {
        let stack = try TestStack(type: .inMemory)
        let context = stack.newContext()
        let changes = NotificationRecorder(ManagedObjectContext.objectsDidChangeNotification, object: context)
        try context.performAndWait {
            let kept = Company(context: context)
            let gone = Company(context: context)
            context.delete(gone)
            context.processPendingChanges()
            let change = try #require(try changes.notifications.last.map(ObjectsDidChange.init))
            #expect(change.insertedObjectIDs == [kept.objectID])
            #expect(change.deletedObjectIDs == [gone.objectID])

            // Inserted again after the delete: pending as an insert once more.
            context.insert(gone)
            context.processPendingChanges()
            let again = try #require(try changes.notifications.last.map(ObjectsDidChange.init))
            #expect(again.insertedObjectIDs == [gone.objectID])
        }
    }

    @Test func rollbackAndResetForgetPendingInsertsSoTheyCanBeReportedAgain() throws {
        let stack = try TestStack(type: .inMemory)
        let context = stack.newContext()
        let changes = NotificationRecorder(ManagedObjectContext.objectsDidChangeNotification, object: context)
        try context.performAndWait {
            _ = Company(context: context)
            context.rollback()
            let count = changes.notifications.count
            context.processPendingChanges()
            #expect(changes.notifications.count == count, "nothing is pending after a rollback")

            let company = Company(context: context)
            context.reset()
            context.insert(company)
            context.processPendingChanges()
            let change = try #require(try changes.notifications.last.map(ObjectsDidChange.init))
            #expect(change.insertedObjectIDs == [company.objectID])
        }
    }

    @Test func aSavesInsertedIDsAreTheSavedObjectsAsASetWhenRead() throws {
        let stack = try TestStack(type: .sqlite)
        let context = stack.newContext()
        let saves = NotificationRecorder(ManagedObjectContext.didSaveNotification, object: context)
        let (ids, save) = try context.performAndWait {
            let companies = (0..<50).map { index -> Company in
                let company = Company(context: context)
                company.symbol = "S\(index)"
                return company
            }
            try context.save()
            let save = try #require(try saves.notifications.last.map(ContextDidSave.init))
            return (Set(companies.map(\.objectID)), save)
        }
        #expect(save.inserted.count == 50)
        #expect(save.insertedObjectIDs == ids)
        // Read again, and through a copy, it is the same set; copies compare equal.
        let copy = save
        #expect(copy.insertedObjectIDs == ids)
        #expect(copy == save)
        var changed = save
        changed.insertedObjectIDs.removeFirst()
        #expect(changed != save)
        #expect(changed.insertedObjectIDs.count == 49)
    }

    @Test func aDeferredSetReadFromManyThreadsIsBuiltOnceAndAgrees() async {
        let entity = TestModel.make().entitiesByName["Company"]!
        let list = (0..<1_000).map { _ in ObjectID.temporary(for: entity) }
        let deferred = DeferredObjectIDSet(distinct: list)
        let sets = await withTaskGroup(of: Set<ObjectID>.self) { group in
            for _ in 0..<8 { group.addTask { deferred.set } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(sets.allSatisfy { $0 == Set(list) })
        #expect(deferred.count == 1_000)
        #expect(Set(deferred.ids) == Set(list))
    }

    /// What each object costs in memory, which issue #36 measures per object:
    /// an ID of two words (a scope and a key), a value of three, and an object
    /// of 64 bytes, an 80-byte heap block (72 usable: room for eight one-byte
    /// `@Managed` properties of a subclass).
    @Test func anIDIsTwoWordsAndAFaultIsSmall() throws {
        #expect(MemoryLayout<ObjectID>.size == 2 * MemoryLayout<Int>.size)
        #expect(MemoryLayout<PropertyValue>.stride == 3 * MemoryLayout<Int>.size)
        let entity = TestModel.make().entitiesByName["Company"]!
        #if os(Linux)
        let object = ManagedObject(entity: entity, insertInto: nil)
        let size = withExtendedLifetime(object) { mallocUsableSize(Unmanaged.passUnretained(object).toOpaque()) }
        #expect(size <= 72, "a ManagedObject instance takes \(size) bytes of heap")
        #else
        _ = entity
        #endif
    }
}

/// What an object keeps beside its values (a snapshot of its own, a version
/// beyond 32 bits) lives in a box made on first need; each reads back as written.
@Suite struct ObjectStorageTests {
    @Test(arguments: [Int64(0), 1, Int64(UInt32.max) - 1, Int64(UInt32.max), Int64(UInt32.max) + 5, Int64.max, -1, Int64.min])
    func aVersionOfAnySizeReadsBackAsWritten(_ version: Int64) throws {
        let entity = try #require(TestModel.make().entitiesByName["Company"])
        let object = ManagedObject(entity: entity, insertInto: nil)
        var values = entity.initialSlots
        object.takeFetchedValues(&values)
        object.snapshotVersion = version
        #expect(object.snapshotVersion == version)
        // A change of the values (which gives the object a snapshot of its own) keeps it.
        object.replaceSlot(.string("changed"), at: try #require(entity.propertiesByName["name"]).index)
        #expect(object.snapshotVersion == version)
        #expect(object.snapshot == entity.initialSlots)
        object.takeValuesAsSnapshot()
        #expect(object.snapshotVersion == version)
        #expect(object.snapshot == object.slots)
        object.snapshotVersion = 3
        #expect(object.snapshotVersion == 3)
    }

    @Test func theSnapshotIsKeptApartFromTheValuesOnlyWhileTheyDiffer() throws {
        let entity = try #require(TestModel.make().entitiesByName["Company"])
        let name = try #require(entity.propertiesByName["name"]).index
        let object = ManagedObject(entity: entity, insertInto: nil)
        var fetched = entity.initialSlots
        fetched[name] = .string("fetched")
        let row = fetched
        object.takeFetchedValues(&fetched)
        #expect(fetched.isEmpty && object.slots == row && object.snapshot == row)
        object.slots[name] = .string("edited")
        #expect(object.snapshot == row && object.slots[name] == .string("edited"))
        object.snapshot = nil
        #expect(object.snapshot == nil && object.slots[name] == .string("edited"))
        object.takeValuesAsSnapshot()
        #expect(object.snapshot?[name] == .string("edited"))
        object.turnIntoFault()
        #expect(object.slots.isEmpty && object.snapshot == nil && object.isFault)
    }
}
