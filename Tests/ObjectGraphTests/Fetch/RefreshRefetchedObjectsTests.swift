import CFaultVFS
import Foundation
import ObjectGraph
import Testing

/// `FetchRequest.shouldRefreshRefetchedObjects`: loaded objects a fetch
/// returns take the store's current values, their unsaved changes kept on
/// top; without it they come back as they were.
@Suite struct RefreshRefetchedObjectsTests {
    /// A stack with companies A (10 employees) and B (20), A loaded in `reader`.
    private struct Setup {
        let stack: TestStack
        let reader: ManagedObjectContext
        let a: Company
        let ids: [ObjectID]

        init(_ type: StoreType) throws {
            stack = try TestStack(type: type)
            ids = try stack.seedCompanies(["A", "B"])
            let reader = stack.newContext()
            self.reader = reader
            let id = ids[0]
            a = try reader.performAndWait { try #require(try reader.existingObject(with: id) as? Company) }
            reader.performAndWait { #expect(a.employees == 10 && !a.isFault) }
        }

        /// Saves new employee counts from another context of the coordinator.
        func saveElsewhere(_ employees: [Int]) throws {
            let writer = stack.newContext()
            try writer.performAndWait {
                for (id, count) in zip(ids, employees) {
                    try #require(try writer.existingObject(with: id) as? Company).employees = count
                }
                try writer.save()
            }
        }

        func fetch(_ configure: (inout FetchRequest<Company>) -> Void = { _ in }) throws -> [Company] {
            var request = FetchRequest<Company>(entityName: "Company")
            request.sortDescriptors = [FetchSort(key: "symbol")]
            configure(&request)
            return try reader.fetch(request)
        }
    }

    @Test(arguments: allStoreTypes)
    func withoutItALoadedObjectKeepsTheValuesItHad(type: StoreType) throws {
        let setup = try Setup(type)
        try setup.saveElsewhere([11, 21])
        try setup.reader.performAndWait {
            let companies = try setup.fetch()
            #expect(companies.first === setup.a)
            #expect(setup.a.employees == 10)
        }
    }

    @Test(arguments: allStoreTypes)
    func aLoadedObjectTakesTheStoresValuesAndStaysLoaded(type: StoreType) throws {
        let setup = try Setup(type)
        try setup.saveElsewhere([11, 21])
        try setup.reader.performAndWait {
            let companies = try setup.fetch { $0.shouldRefreshRefetchedObjects = true }
            #expect(companies.map(\.symbol) == ["A", "B"])
            #expect(companies.first === setup.a)
            #expect(!setup.a.isFault)
            #expect(!setup.a.hasChanges)
            #expect(setup.a.employees == 11)
            #expect(companies[1].employees == 21)
        }
    }

    @Test(arguments: allStoreTypes)
    func unsavedChangesStayOnTopOfTheStoresValues(type: StoreType) throws {
        let setup = try Setup(type)
        setup.reader.performAndWait { setup.a.name = "Changed here" }
        try setup.saveElsewhere([11, 21])
        try setup.reader.performAndWait {
            _ = try setup.fetch { $0.shouldRefreshRefetchedObjects = true }
            #expect(setup.a.name == "Changed here")
            #expect(setup.a.employees == 11)
            #expect(setup.a.hasChanges)
            // The change is still one to save, over the store's new values.
            try setup.reader.save()
        }
        let check = setup.stack.newContext()
        try check.performAndWait {
            let saved = try #require(try check.existingObject(with: setup.ids[0]) as? Company)
            #expect(saved.name == "Changed here")
            #expect(saved.employees == 11)
        }
    }

    @Test(arguments: allStoreTypes)
    func aChangeToTheSameAttributeWinsOverTheStore(type: StoreType) throws {
        let setup = try Setup(type)
        setup.reader.performAndWait { setup.a.employees = 99 }
        try setup.saveElsewhere([11, 21])
        try setup.reader.performAndWait {
            _ = try setup.fetch { $0.shouldRefreshRefetchedObjects = true }
            #expect(setup.a.employees == 99)
            #expect(setup.a.hasChanges)
        }
    }

    @Test(arguments: allStoreTypes)
    func faultsStayFaultsUnlessObjectsAreWantedFilled(type: StoreType) throws {
        let setup = try Setup(type)
        let bID = setup.ids[1]
        let b = setup.reader.performAndWait { setup.reader.object(with: bID) }
        try setup.saveElsewhere([11, 21])
        try setup.reader.performAndWait {
            _ = try setup.fetch { $0.shouldRefreshRefetchedObjects = true }
            #expect(b.isFault)
            #expect(!setup.a.isFault)
            let filled = try setup.fetch {
                $0.shouldRefreshRefetchedObjects = true
                $0.returnsObjectsAsFaults = false
            }
            #expect(filled.allSatisfy { !$0.isFault })
            #expect(filled.map(\.employees) == [11, 21])
        }
    }

    @Test(arguments: allStoreTypes)
    func refreshingWorksWithPendingInsertsAndWithoutRows(type: StoreType) throws {
        let setup = try Setup(type)
        try setup.saveElsewhere([11, 21])
        try setup.reader.performAndWait {
            // A pending insert of the entity: the fetch folds in unsaved changes.
            let c = Company(context: setup.reader)
            c.symbol = "C"
            c.employees = 30
            let companies = try setup.fetch { $0.shouldRefreshRefetchedObjects = true }
            #expect(companies.map(\.symbol) == ["A", "B", "C"])
            #expect(setup.a.employees == 11)
            #expect(c.isInserted && c.employees == 30)
        }
        try setup.saveElsewhere([12, 22])
        try setup.reader.performAndWait {
            setup.reader.rollback()
            _ = try setup.fetch {
                $0.shouldRefreshRefetchedObjects = true
                $0.includesPropertyValues = false
            }
            #expect(setup.a.employees == 12)
        }
    }

    @Test(arguments: allStoreTypes)
    func aChildContextTakesItsParentsValues(type: StoreType) throws {
        let setup = try Setup(type)
        let child = ManagedObjectContext(concurrencyType: .privateQueue, parent: setup.reader)
        let aID = setup.ids[0]
        let inChild = try child.performAndWait {
            let company = try #require(try child.existingObject(with: aID) as? Company)
            #expect(company.employees == 10)
            return company
        }
        // Unsaved in the parent: what the child's refetch reads.
        setup.reader.performAndWait { setup.a.employees = 15 }
        try child.performAndWait {
            var request = FetchRequest<Company>(entityName: "Company")
            _ = try child.fetch(request)
            #expect(inChild.employees == 10)
            request.shouldRefreshRefetchedObjects = true
            _ = try child.fetch(request)
            #expect(inChild.employees == 15)
            #expect(!inChild.hasChanges)
        }
    }

    @Test func aRefetchThatCannotReadTheStoreThrowsAndEveryObjectKeepsWhatItHad() throws {
        let stack = try FaultStack(copying: try StoreTemplate(companies: 2, updatesEach: 0))
        let context = stack.newContext()
        var request = companiesBySymbol
        request.shouldRefreshRefetchedObjects = true
        let (company, employees) = try context.performAndWait {
            let company = try #require(try context.fetch(request).first)
            company.name = "Unsaved"
            return (company, company.employees)
        }
        // Written by another connection: the store's connections read the file's pages again.
        try RawStore.execute(stack.storeURL, "UPDATE ZCOMPANY SET ZEMPLOYEES = ZEMPLOYEES + 1, Z_OPT = Z_OPT + 1")
        stack.plan.arm(.read, code: CFAULTVFS_IOERR_READ, repeating: .always)
        try context.performAndWait {
            #expect(throws: (any Error).self) { try context.fetch(request) }
            stack.plan.disarm()
            #expect(!company.isFault && company.hasChanges)
            #expect(company.name == "Unsaved" && company.employees == employees)
            // Readable again: the same refetch brings the store's row under the change.
            _ = try context.fetch(request)
            #expect(company.name == "Unsaved" && company.employees == employees + 1)
        }
    }

    @Test func theRowsTheFetchReadServeTheRefreshWithoutASecondRead() throws {
        let setup = try Setup(.sqlite)
        try setup.saveElsewhere([11, 21])
        let coordinator = setup.stack.coordinator
        try setup.reader.performAndWait {
            let before = coordinator.rowCacheStatistics
            _ = try setup.fetch { $0.shouldRefreshRefetchedObjects = true }
            let after = coordinator.rowCacheStatistics
            #expect(setup.a.employees == 11)
            // The one loaded object's row came from the cache, where the fetch had just put it.
            #expect(after.hits - before.hits == 1)
            #expect(after.misses == before.misses)
        }
    }

    @Test func otherResultTypesIgnoreIt() throws {
        let setup = try Setup(.sqlite)
        try setup.saveElsewhere([11, 21])
        try setup.reader.performAndWait { () throws in
            var request = FetchRequest<ObjectID>(entityName: "Company")
            request.resultType = .managedObjectID
            request.shouldRefreshRefetchedObjects = true
            #expect(try setup.reader.fetch(request).count == 2)
            #expect(setup.a.employees == 10)
        }
    }
}
