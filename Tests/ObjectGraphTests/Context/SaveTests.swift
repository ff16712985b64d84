import Foundation
import ObjectGraph
import Testing
import DataStackStores

/// Saving: validation first, permanent IDs, row versions, key allocation, and
/// all-or-nothing writes.
@Suite struct SaveTests {
    @Test(arguments: allStoreTypes)
    func oneInvalidObjectStopsTheWholeSaveAndTheContextKeepsItsChanges(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let context = stack.newContext()
        try context.performAndWait {
            let good = Company(context: context)
            good.symbol = "GOOD"
            let bad = Company(context: context)   // symbol is required and missing
            let update = StockUpdate(context: context)
            update.company = good

            #expect(throws: ObjectGraphError.self) { try context.save() }
            #expect(context.hasChanges)
            #expect(context.insertedObjects == [good, bad, update])
            #expect(good.objectID.isTemporaryID)
            #expect(try context.count(for: FetchRequest<Company>()) == 2, "the pending inserts are still there")

            let reader = stack.newContext()
            try reader.performAndWait { () throws in
                var request = FetchRequest<Company>()
                request.includesPendingChanges = false
                #expect(try reader.count(for: request) == 0, "nothing reached the store")
            }

            bad.symbol = "FIXED"
            try context.save()
            #expect(!context.hasChanges)
        }
        if type == .sqlite {
            #expect(try RawStore.int(stack.storeURL, "SELECT count(*) FROM ZCOMPANY") == 2)
            #expect(try RawStore.int(stack.storeURL, "SELECT count(*) FROM ZSTOCKUPDATE WHERE ZCOMPANY IS NOT NULL") == 1)
        }
    }

    @Test func aFailedValidationWritesNothingToTheFile() throws {
        let stack = try TestStack(type: .sqlite)
        try stack.seedCompanies(["A"])
        let context = stack.newContext()
        try context.performAndWait {
            let existing = try #require(try context.fetch(FetchRequest<Company>()).first)
            existing.name = "renamed"
            _ = Company(context: context)   // invalid
            #expect(throws: ObjectGraphError.self) { try context.save() }
        }
        #expect(try RawStore.int(stack.storeURL, "SELECT count(*) FROM ZCOMPANY") == 1)
        #expect(try RawStore.text(stack.storeURL, "SELECT ZNAME FROM ZCOMPANY") == nil)
        #expect(try RawStore.int(stack.storeURL, "SELECT Z_OPT FROM ZCOMPANY") == 1)
        #expect(try RawStore.int(stack.storeURL, "SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = 'Company'") == 1)
    }

    @Test(arguments: allStoreTypes)
    func savedObjectsGetPermanentIDsAndStayRegisteredUnderThem(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let context = stack.newContext()
        try context.performAndWait {
            let company = Company(context: context)
            company.symbol = "A"
            let update = StockUpdate(context: context)
            update.company = company
            let temporary = company.objectID
            try context.save()

            #expect(!company.objectID.isTemporaryID)
            #expect(!update.objectID.isTemporaryID)
            #expect(context.registeredObject(for: company.objectID) === company)
            #expect(context.registeredObject(for: temporary) == nil)
            #expect(update.company === company, "relationships follow the new IDs")
            #expect(company.updates == [update])
            #expect(try context.existingObject(with: company.objectID) === company)
        }
    }

    @Test func rowVersionsStartAtOneAndGoUpWithEachSavedUpdate() throws {
        let stack = try TestStack(type: .sqlite)
        let context = stack.newContext()
        let version = { try RawStore.int(stack.storeURL, "SELECT Z_OPT FROM ZCOMPANY WHERE ZSYMBOL = 'A'") }
        try context.performAndWait {
            let a = Company(context: context)
            a.symbol = "A"
            let b = Company(context: context)
            b.symbol = "B"
            try context.save()
            #expect(try version() == 1)

            a.employees = 1
            try context.save()
            #expect(try version() == 2)

            a.employees = 2
            try context.save()
            #expect(try version() == 3)

            b.employees = 5   // another row: A is untouched
            try context.save()
            #expect(try version() == 3)
            #expect(try RawStore.int(stack.storeURL, "SELECT Z_OPT FROM ZCOMPANY WHERE ZSYMBOL = 'B'") == 2)
        }
        // Another context reads the current version and goes on from there.
        let other = stack.newContext()
        try other.performAndWait {
            var request = FetchRequest<Company>()
            request.sortDescriptors = [FetchSort(key: "symbol")]
            try other.fetch(request)[0].employees = 3
            try other.save()
        }
        #expect(try version() == 4)
    }

    @Test func primaryKeysAreAllocatedAsOneBlockPerSave() throws {
        let stack = try TestStack(type: .sqlite)
        let max = { (entity: String) in try RawStore.int(stack.storeURL, "SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = '\(entity)'") }
        #expect(try max("Company") == 0)
        #expect(try max("StockUpdate") == 0)
        let context = stack.newContext()
        try context.performAndWait {
            for index in 0..<3 {
                let company = Company(context: context)
                company.symbol = "C\(index)"
                for _ in 0..<2 { StockUpdate(context: context).company = company }
            }
            try context.save()
            #expect(try max("Company") == 3)
            #expect(try max("StockUpdate") == 6)

            let more = Company(context: context)
            more.symbol = "MORE"
            let extra = Company(context: context)
            extra.symbol = "EXTRA"
            try context.save()
            #expect(try max("Company") == 5)
            #expect(try max("StockUpdate") == 6)
            #expect(Set([more.objectID.primaryKey, extra.objectID.primaryKey]) == [4, 5])

            let deleted = try #require(more.objectID.primaryKey)
            context.delete(more)
            try context.save()
            #expect(try max("Company") == 5, "deleting never hands keys back")
            let keys = try RawStore.texts(stack.storeURL, "SELECT Z_PK FROM ZCOMPANY ORDER BY Z_PK")
            #expect(keys == ["1", "2", "3", "4", "5"].filter { $0 != String(deleted) })
        }
    }

    @Test func subentitiesDrawKeysFromTheirRootsCounter() throws {
        let stack = try TestStack(type: .sqlite, model: EngineTestModel.make())
        let bond = try #require(stack.model.entitiesByName["Bond"])
        let stock = try #require(stack.model.entitiesByName["Stock"])
        let context = stack.newContext()
        let ids = try context.performAndWait {
            let objects = [ManagedObject(entity: bond, insertInto: context), ManagedObject(entity: stock, insertInto: context),
                           ManagedObject(entity: bond, insertInto: context)]
            try context.save()
            return objects.map(\.objectID)
        }
        #expect(Set(ids.compactMap(\.primaryKey)) == [1, 2, 3])
        #expect(try RawStore.int(stack.storeURL, "SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = 'Asset'") == 3)
        #expect(try RawStore.int(stack.storeURL, "SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = 'Bond'") == 0)
        #expect(try RawStore.int(stack.storeURL, "SELECT count(*) FROM ZASSET") == 3)
    }

    @Test func aSaveThatFailsInSQLiteWritesNothingAndKeepsTheChanges() throws {
        let stack = try TestStack(type: .sqlite)
        try stack.seedCompanies(["A"])
        // Another program takes primary key 2 without telling Z_PRIMARYKEY: the next insert collides.
        try RawStore.execute(stack.storeURL, "INSERT INTO ZCOMPANY (Z_PK, Z_ENT, Z_OPT, ZSYMBOL) VALUES (2, 1, 1, 'SQUATTER')")
        let context = stack.newContext()
        try context.performAndWait {
            let existing = try #require(try context.fetch(FetchRequest<Company>(entityName: "Company", predicate: nil,
                                                                                   sortDescriptors: [FetchSort(key: "symbol")])).first)
            existing.name = "renamed"
            let fresh = Company(context: context)
            fresh.symbol = "NEW"
            let update = StockUpdate(context: context)
            update.company = fresh

            let error = #expect(throws: PersistentStoreError.self) { try context.save() }
            #expect(error?.url?.path == stack.storeURL.path)
            #expect(error.map { "\($0)" }?.contains(stack.storeURL.path) == true)
            #expect(context.hasChanges)
            #expect(existing.isUpdated)
            #expect(fresh.isInserted && fresh.objectID.isTemporaryID)
            #expect(context.insertedObjects.count == 2)
        }
        #expect(try RawStore.text(stack.storeURL, "SELECT ZNAME FROM ZCOMPANY WHERE ZSYMBOL = 'A'") == nil)
        #expect(try RawStore.int(stack.storeURL, "SELECT Z_OPT FROM ZCOMPANY WHERE ZSYMBOL = 'A'") == 1)
        #expect(try RawStore.int(stack.storeURL, "SELECT count(*) FROM ZSTOCKUPDATE") == 0)
        #expect(try RawStore.int(stack.storeURL, "SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = 'Company'") == 1)
        #expect(try RawStore.int(stack.storeURL, "SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = 'StockUpdate'") == 0)

        // Once the counter is repaired, the same changes save.
        try RawStore.execute(stack.storeURL, "UPDATE Z_PRIMARYKEY SET Z_MAX = 2 WHERE Z_NAME = 'Company'")
        try context.performAndWait { try context.save() }
        #expect(try RawStore.text(stack.storeURL, "SELECT ZNAME FROM ZCOMPANY WHERE ZSYMBOL = 'A'") == "renamed")
        #expect(try RawStore.int(stack.storeURL, "SELECT Z_PK FROM ZCOMPANY WHERE ZSYMBOL = 'NEW'") == 3)
    }

    @Test func aSaveRefusedByATriggerLeavesTheFileAsItWas() throws {
        let stack = try TestStack(type: .sqlite)
        try stack.seedCompanies(["A", "B"])
        try RawStore.execute(stack.storeURL, """
            CREATE TRIGGER refuse_deletes BEFORE DELETE ON ZCOMPANY WHEN old.ZSYMBOL = 'B'
            BEGIN SELECT RAISE(ABORT, 'B stays'); END
            """)
        let context = stack.newContext()
        try context.performAndWait {
            var request = FetchRequest<Company>()
            request.sortDescriptors = [FetchSort(key: "symbol")]
            let companies = try context.fetch(request)
            companies[0].employees = 1000
            context.delete(companies[1])
            Company(context: context).symbol = "C"
            let error = #expect(throws: PersistentStoreError.self) { try context.save() }
            #expect(error?.underlyingDescription?.contains("B stays") == true)
            #expect(context.deletedObjects.count == 1 && context.updatedObjects.count == 1 && context.insertedObjects.count == 1)
        }
        #expect(try RawStore.texts(stack.storeURL, "SELECT ZSYMBOL || ':' || ZEMPLOYEES || ':' || Z_OPT FROM ZCOMPANY ORDER BY ZSYMBOL")
                == ["A:10:1", "B:20:1"])
        #expect(try RawStore.int(stack.storeURL, "SELECT Z_MAX FROM Z_PRIMARYKEY WHERE Z_NAME = 'Company'") == 2)
    }

    @Test(arguments: allStoreTypes)
    func aSaveWithoutChangesDoesNothing(type: StoreType) throws {
        let stack = try TestStack(type: type)
        let context = stack.newContext()
        try context.performAndWait {
            try context.save()
            #expect(!context.hasChanges)
        }
    }

    @Test func aReadOnlyContextRefusesToSaveAndKeepsItsChanges() throws {
        let stack = try TestStack(type: .sqlite)
        let context = stack.newContext()
        context.isReadOnly = true
        try context.performAndWait { () throws in
            Company(context: context).symbol = "A"
            #expect(throws: ObjectGraphError.self) { try context.save() }
            #expect(context.hasChanges)
        }
        #expect(try RawStore.int(stack.storeURL, "SELECT count(*) FROM ZCOMPANY") == 0)
    }
}
