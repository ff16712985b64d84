import Foundation
import Testing
@testable import ObjectGraph
import DataStackStores

/// A context's lists of inserted, updated and deleted objects (`ChangedObjects`):
/// marks on the objects and a list, which must agree with a set of the objects
/// through any sequence of adds and removals.
@Suite struct ChangedObjectsTests {
    private let entity = TestModel.make().entitiesByName["Company"]!

    @Test func agreesWithASetOverRandomAddsAndRemovals() {
        var changed = ChangedObjects(marking: .updatedChange, listing: .updatedListed)
        var expected = Set<ObjectIdentifier>()
        let objects = (0..<300).map { _ in ManagedObject(entity: entity, insertInto: nil) }
        var generator = SplitMix64(seed: 36)
        for step in 0..<20_000 {
            let object = objects[Int(generator.next() % 300)]
            if generator.next() % 100 < 45 {
                changed.insert(object)
                expected.insert(ObjectIdentifier(object))
            } else {
                changed.remove(object)
                expected.remove(ObjectIdentifier(object))
            }
            if step % 997 == 0 {
                #expect(Set(changed.objects.map(ObjectIdentifier.init)) == expected, "step \(step)")
            }
            #expect(changed.count == expected.count)
        }
        #expect(changed.objects.count == expected.count, "each object once")
        changed.removeAll()
        #expect(changed.isEmpty && changed.objects.isEmpty)
        #expect(objects.allSatisfy { !changed.contains($0) })
    }

    @Test func theListsMarksAreItsOwn() {
        var inserted = ChangedObjects(marking: .insertedChange, listing: .insertedListed)
        var updated = ChangedObjects(marking: .updatedChange, listing: .updatedListed)
        let object = ManagedObject(entity: entity, insertInto: nil)
        inserted.insert(object)
        #expect(inserted.contains(object) && !updated.contains(object))
        updated.insert(object)
        inserted.remove(object)
        #expect(!inserted.contains(object) && updated.contains(object))
        #expect(inserted.objects.isEmpty && updated.objects.count == 1)
        // The object's own state flags are not the lists' marks.
        object.flags.insert(.updated)
        object.flags.remove(.updated)
        #expect(updated.contains(object))
    }

    @Test func aContextReportsItsChangesThroughInsertsDeletesAndRollback() throws {
        let stack = try TestStack(type: .inMemory)
        let context = stack.newContext()
        try context.performAndWait {
            let saved = (0..<3).map { index -> Company in
                let company = Company(context: context)
                company.symbol = "S\(index)"
                return company
            }
            try context.save()
            let inserted = (0..<200).map { index -> Company in
                let company = Company(context: context)
                company.symbol = "N\(index)"
                return company
            }
            // Most of the inserts go again before the save: the list compacts.
            for company in inserted.dropFirst(10) { context.delete(company) }
            saved[0].symbol = "changed"
            context.delete(saved[1])
            #expect(context.insertedObjects == Set(inserted.prefix(10).map { $0 as ManagedObject }))
            #expect(context.updatedObjects == [saved[0]])
            #expect(context.deletedObjects == [saved[1]])
            context.rollback()
            #expect(!context.hasChanges)
            #expect(context.insertedObjects.isEmpty && context.updatedObjects.isEmpty && context.deletedObjects.isEmpty)
            #expect(saved[0].symbol == "S0")
            // Changed again after the rollback: tracked again.
            saved[2].symbol = "again"
            #expect(context.updatedObjects == [saved[2]])
        }
    }
}
