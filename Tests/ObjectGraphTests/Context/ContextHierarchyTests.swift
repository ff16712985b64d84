import Foundation
import Testing
import ObjectGraph
import DataStackStores

/// Parent and child contexts (SPEC §3.2, §3.3; reference §1.3).
@Suite struct ContextHierarchyTests {
    @Test(arguments: [StoreType.sqlite, .inMemory])
    func childSavePushesIntoTheParentOnly(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let parent = stack.newContext()
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        let id = try child.performAndWait {
            let company = Company(context: child)
            company.symbol = "KID"
            try child.save()
            #expect(!child.hasChanges)
            #expect(company.objectID.isTemporaryID)
            return company.objectID
        }
        try parent.performAndWait {
            #expect(parent.hasChanges)
            let pushed = try #require(parent.registeredObject(for: id) as? Company)
            #expect(pushed.symbol == "KID")
            #expect(pushed.isInserted)
        }
        let reader = stack.newContext()
        #expect(try reader.performAndWait { try reader.count(for: FetchRequest<Company>()) } == 0)
        try parent.performAndWait { try parent.save() }
        #expect(try reader.performAndWait { try reader.count(for: FetchRequest<Company>()) } == 1)
    }

    @Test(arguments: [StoreType.sqlite, .inMemory])
    func childFetchesAndFaultsSeeTheParentsUnsavedState(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let parent = stack.newContext()
        let savedID = try parent.performAndWait {
            let saved = Company(context: parent)
            saved.symbol = "OLD"
            try parent.save()
            saved.symbol = "EDITED"
            let unsaved = Company(context: parent)
            unsaved.symbol = "NEW"
            return saved.objectID
        }
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: parent)
        try child.performAndWait {
            var request = FetchRequest<Company>()
            request.sortDescriptors = [FetchSort(key: "symbol")]
            let companies = try child.fetch(request)
            #expect(companies.map(\.symbol) == ["EDITED", "NEW"])
            let fault = child.object(with: savedID) as! Company
            #expect(fault.symbol == "EDITED")
        }
    }

    @Test func permanentIDsAppearWhenTheRootSaves() throws {
        let stack = try TestStack()
        let root = stack.newContext()
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: root)
        // Unchanged objects are let go: keep the child's object alive, as a view would.
        let childCompany = try child.performAndWait {
            let company = Company(context: child)
            company.symbol = "T"
            try child.save()
            return ObjectBox([company])
        }
        let temporaryID = child.performAndWait { childCompany.objects[0].objectID }
        let rootCompany = try root.performAndWait {
            let company = try #require(root.registeredObject(for: temporaryID))
            try root.save()
            #expect(!company.objectID.isTemporaryID)
            return ObjectBox([company])
        }
        let permanentID = root.performAndWait { rootCompany.objects[0].objectID }
        // The child still knows its object by the temporary ID, and can keep editing it.
        try child.performAndWait {
            let company = try #require(child.registeredObject(for: temporaryID) as? Company)
            company.employees = 5
            try child.save()
        }
        try root.performAndWait {
            let company = try #require(root.registeredObject(for: permanentID) as? Company)
            #expect(company.employees == 5)
            try root.save()
        }
    }

    @Test func obtainPermanentIDsInAChildReachesItsParents() throws {
        let stack = try TestStack()
        let root = stack.newContext()
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: root)
        let id = try child.performAndWait {
            let company = Company(context: child)
            company.symbol = "P"
            try child.obtainPermanentIDs(for: [company])
            #expect(!company.objectID.isTemporaryID)
            #expect(company.isInserted)
            try child.save()
            return company.objectID
        }
        try root.performAndWait {
            let pushed = try #require(root.registeredObject(for: id))
            try root.save()
            #expect(root.registeredObject(for: id) === pushed)
            #expect(pushed.objectID == id)
        }
        let reader = stack.newContext()
        let symbol = try reader.performAndWait { (try reader.existingObject(with: id) as? Company)?.symbol }
        #expect(symbol == "P")
    }

    @Test func childDeletesAndUpdatesReachTheParent() throws {
        let stack = try TestStack()
        let root = stack.newContext()
        let (keepID, dropID) = try root.performAndWait {
            let keep = Company(context: root)
            keep.symbol = "KEEP"
            let drop = Company(context: root)
            drop.symbol = "DROP"
            try root.save()
            return (keep.objectID, drop.objectID)
        }
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: root)
        try child.performAndWait {
            (try child.existingObject(with: keepID) as! Company).employees = 9
            child.delete(try child.existingObject(with: dropID))
            try child.save()
        }
        try root.performAndWait {
            #expect(root.updatedObjects.map(\.objectID) == [keepID])
            #expect(root.deletedObjects.map(\.objectID) == [dropID])
            try root.save()
            #expect(try root.count(for: FetchRequest<Company>()) == 1)
        }
    }

    @Test func savesToPersistentStoreCarriesAChildSaveToDisk() throws {
        let stack = try TestStack()
        let root = stack.newContext()
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: root)
        child.savesToPersistentStore = true
        try child.performAndWait {
            let company = Company(context: child)
            company.symbol = "DISK"
            try child.save()
        }
        #expect(root.performAndWait { root.hasChanges } == false)
        let reader = stack.newContext()
        #expect(try reader.performAndWait { try reader.count(for: FetchRequest<Company>()) } == 1)
    }
}
